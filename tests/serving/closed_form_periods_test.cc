// Each registered scheduler says itself whether a decode-only period can run in closed form
// (Scheduler::closed_form_periods, Scheduler::admits_nothing), asking the queues through a
// read-only QueueView. A recording fake view stands for the queues here, so that what each
// scheduler asks is visible: the question is the scheduler's, the answer the queues'.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "sim/serving/scheduler.h"

namespace kvsim {
namespace {

// Answers prefills_blocked with `blocked` and has_prefilling with `prefilling`; records each
// prefills_blocked question.
class FakeQueues final : public QueueView {
 public:
  struct Asked {
    BatchLimits limits;
    int64_t decoding;
    int64_t walk_frees;
  };
  bool blocked = true;
  bool prefilling = false;
  mutable std::vector<Asked> asked;

  bool prefills_blocked(const BatchLimits& limits, int64_t decoding,
                        int64_t walk_frees) const override {
    asked.push_back({limits, decoding, walk_frees});
    return blocked;
  }
  bool has_prefilling() const override { return prefilling; }
};

BatchLimits chunked_limits() {
  BatchLimits l;
  l.max_num_seqs = 64;
  l.max_num_batched_tokens = 2048;
  l.chunked_prefill = true;
  return l;
}

}  // namespace

TEST_CASE(
    "continuous: a period is closed form while the prefills it would plan after its decode walk "
    "are blocked") {
  const std::unique_ptr<Scheduler> s = make_continuous_scheduler();
  CHECK(s->closed_form_periods());
  FakeQueues q;
  const BatchLimits limits = chunked_limits();
  // It walks the decodes first: it asks with the decode count (the budget they take) and the
  // blocks its walk frees, in its own limits.
  CHECK(s->admits_nothing(q, limits, 40, 3));
  REQUIRE(q.asked.size() == 1);
  CHECK(q.asked[0].limits == limits);
  CHECK(q.asked[0].decoding == 40);
  CHECK(q.asked[0].walk_frees == 3);
  q.blocked = false;
  CHECK_FALSE(s->admits_nothing(q, limits, 40, 0));
}

TEST_CASE(
    "vllm_v0: a period is closed form while no whole prompt fits the whole budget, whatever the "
    "walk frees") {
  const std::unique_ptr<Scheduler> s = make_vllm_v0_scheduler();
  CHECK(s->closed_form_periods());
  FakeQueues q;
  // It admits whole prompts before its walk: no decode takes budget (0) and the walk's frees come
  // after (0), and chunked prefill is off for that question.
  CHECK(s->admits_nothing(q, chunked_limits(), 40, 3));
  REQUIRE(q.asked.size() == 1);
  BatchLimits whole = chunked_limits();
  whole.chunked_prefill = false;
  CHECK(q.asked[0].limits == whole);
  CHECK(q.asked[0].decoding == 0);
  CHECK(q.asked[0].walk_frees == 0);
  q.blocked = false;
  CHECK_FALSE(s->admits_nothing(q, chunked_limits(), 40, 0));
}

TEST_CASE("static: a period is closed form while its running batch has no prefill left") {
  const std::unique_ptr<Scheduler> s = make_static_scheduler();
  CHECK(s->closed_form_periods());
  FakeQueues q;
  q.blocked = false;  // not asked: a running batch admits nothing until it ends
  CHECK(s->admits_nothing(q, chunked_limits(), 8, 2));
  CHECK(q.asked.empty());
  q.prefilling = true;
  CHECK_FALSE(s->admits_nothing(q, chunked_limits(), 8, 0));
}

TEST_CASE("a scheduler that does not say otherwise has no closed-form periods") {
  class PlainScheduler final : public Scheduler {
   public:
    bool plan(IterationPlan& it, const BatchLimits& limits, PlanSteps& steps) const override {
      (void)it, (void)limits, (void)steps;
      return true;
    }
  };
  const PlainScheduler s;
  FakeQueues q;
  CHECK_FALSE(s.closed_form_periods());
  CHECK_FALSE(s.admits_nothing(q, chunked_limits(), 8, 0));
  CHECK(q.asked.empty());
}

}  // namespace kvsim
