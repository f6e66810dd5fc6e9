// Async scheduling (engine.async_scheduling, vLLM's AsyncScheduler driven by
// EngineCore.step_with_batch_queue with a batch queue of 2; docs/vllm-conformance.md).
//
// vLLM schedules step N+1 when step N starts on the GPU, before N's output: a request running in
// N is counted one token ahead (an output placeholder), so N+1's plan is the plan kvsim makes
// after N has ended, except for two things. It sees only the requests added before that
// schedule() call, at N's start; and the requests whose last token N computes are still running
// in it, holding their blocks and their place under max_num_seqs, but not scheduled (schedule()
// skips a request whose placeholders reach max_tokens: RunQueues::grow_decodes); they finish
// with N's output (update_from_output), right after that plan. kvsim makes N+1's plan when N
// ends, with those two differences: the arrivals since N's start are held out of the waiting
// queue (RunQueues::hold), the finished ones kept running (finishing_).
//
// A schedule() that takes nothing is made again after N's output, with the arrivals up to then
// (the engine's loop pops N's output, then calls schedule() again before N+1 would have run).
// From an idle GPU the plan sees the arrivals up to now, as in synchronous mode.
#include "core/check.h"
#include "sim/serving/replica.h"

namespace kvsim {

void Replica::admitted(RequestState& r) {
  if (async_) {
    queues_.hold(r, events_.now());  // the next plan lets it in if it was there by its cutoff
  } else {
    queues_.admit(r);
  }
}

void Replica::hold_finishing(int64_t id) {
  queues_.leave_decodes(requests_.at(id));  // out of the decoding set: it grows no more
  finishing_.push_back(id);
}

void Replica::release_finishing() {
  if (finishing_.empty()) return;
  for (const int64_t id : finishing_) {
    auto f = requests_.find(id);
    // (A plan may have preempted it: it finishes from the waiting queue, as vLLM's
    // update_from_output removes a stopped preempted request from there.)
    if (f == requests_.end() || f->second.outcome != Outcome::kNone) continue;
    finish_request(id, f->second.truncated ? Outcome::kCompletedTruncated : Outcome::kCompleted);
  }
  finishing_.clear();
  recorder_.on_state(events_.now(), pool_.snapshot());
  // Guards that waited for them may admit now (held until the plan that may see them).
  run_admission();
}

bool Replica::plan_ahead() {
  const bool after_step = plan_after_end_;
  plan_after_end_ = false;
  if (!after_step) {  // the GPU was idle: schedule() now
    release_finishing();
    queues_.release_held(events_.now());
    return plan();
  }
  queues_.release_held(iteration_start_);
  bool nothing = false;
  const bool planned = plan(&nothing);
  // Speculation: the plan may hold requests the step just ended finished (RunQueues::spec_due).
  if (planned && spec_) queues_.detach_finished(planning_, finishing_);
  release_finishing();
  if (planned || !nothing || down_) return planned;
  queues_.release_held(events_.now());
  return plan();
}

}  // namespace kvsim
