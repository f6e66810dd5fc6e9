// StepDecodes: the plain DecodeSet (decode_set.h), stepping's: a plan walks every running
// request, growing each decoding one by one token through the ledger (RunQueues::grow_each_decode:
// deferred growth inside its last block, a store call at a block boundary), and the step's end
// gives each its token.
#pragma once

#include <vector>

#include "sim/serving/decode_set.h"

namespace kvsim {

class RunQueues;

class StepDecodes final : public DecodeSet {
 public:
  // Borrowed; it must outlive it.
  explicit StepDecodes(RunQueues& queues) : queues_(queues) {}

  void started_prefill(RequestState&) override {}
  void prefilled(RequestState&, bool) override {}
  void join(RequestState&) override {}
  void leave(RequestState&) override {}
  bool grow(IterationPlan& it) override;
  void recount(IterationPlan& it) const override {
    it.decode_seqs = static_cast<int64_t>(it.decode.size());  // (preempt() took its context out)
  }
  void commit(const IterationPlan& it, std::vector<int64_t>& done) override;
  AggregateLag lag(const RequestState&) const override { return {}; }
  const std::vector<RequestState*>& prefill_walk() const override;
  const RequestState* first_prefilling() const override;
  bool explicit_figures() const override { return true; }

 private:
  RunQueues& queues_;
};

}  // namespace kvsim
