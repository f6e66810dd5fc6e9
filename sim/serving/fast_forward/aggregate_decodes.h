// AggregateDecodes: the DecodeSet (sim/serving/decode_set.h) of the fast-forward. Its decoding
// requests are members of the decode aggregate (lazy_decodes.h), grown through the ledger only
// at their own events, so that a plan's decode walk visits only the due members; it also keeps
// the running requests still prefilling, which admit_prefills walks instead of the whole batch.
// The fast-forward's stretches (stretch.cc) plan their steps through grow_due, as a plan does.
#pragma once

#include <vector>

#include "sim/serving/decode_set.h"
#include "sim/serving/fast_forward/lazy_decodes.h"

namespace kvsim {

class GpuMemoryPool;
class KvLedger;
class RunQueues;

class AggregateDecodes final : public DecodeSet {
 public:
  // Borrowed; they must outlive it. Set on queues without requests.
  AggregateDecodes(RunQueues& queues, KvLedger& ledger, const GpuMemoryPool& pool);

  void started_prefill(RequestState& r) override;
  void prefilled(RequestState& r, bool done) override;
  void join(RequestState& r) override { lazy_.join(r); }
  void leave(RequestState& r) override;
  bool grow(IterationPlan& it) override;
  void recount(IterationPlan& it) const override {
    it.decode_seqs = lazy_.size();
    it.decode_context = lazy_.attended_sum();
  }
  void commit(const IterationPlan& it, std::vector<int64_t>& done) override;
  AggregateLag lag(const RequestState& r) const override { return lazy_.lag(r); }
  const std::vector<RequestState*>& prefill_walk() const override { return prefilling_; }
  const RequestState* first_prefilling() const override {
    return prefilling_.empty() ? nullptr : prefilling_.front();
  }
  bool explicit_figures() const override { return false; }

  // The plan of one decode step over the due members `due` (LazyDecodes::take_due): grow's, and
  // the fast-forward's step (which has checked that no growth can fail). False when an OOM ended
  // the plan.
  bool grow_due(IterationPlan& it, const std::vector<RequestState*>& due);
  LazyDecodes& lazy() { return lazy_; }
  // The free blocks a crossing counted in aggregate takes, and the most a due member's growth
  // takes: one in every KV cache group (a quiet run's crossings fit in free / this).
  int64_t crossing_blocks() const { return crossing_blocks_; }
  const LazyDecodes& lazy() const { return lazy_; }

 private:
  RunQueues& queues_;
  KvLedger& ledger_;
  const GpuMemoryPool& pool_;
  LazyDecodes lazy_;
  int64_t crossing_blocks_ = 1;
  // The running requests still prefilling, in running order, and grow's due members (reused).
  std::vector<RequestState*> prefilling_;
  std::vector<RequestState*> due_scratch_;
  std::vector<RequestState*> due_all_;  // due members and a step's crossers (an explicit walk)
};

}  // namespace kvsim
