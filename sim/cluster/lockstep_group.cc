#include "sim/cluster/lockstep_group.h"

#include <algorithm>

#include "core/check.h"

namespace kvsim {

LockstepGroup::LockstepGroup(EventQueue& events, std::vector<Replica*> ranks,
                             LockstepOptions options)
    : events_(events), ranks_(std::move(ranks)), options_(options), planned_(ranks_.size(), 0) {
  KVSIM_CHECK(ranks_.size() >= 2, "a lockstep group needs at least 2 ranks, not {}", ranks_.size());
  KVSIM_CHECK(options_.check_every >= 1, "check_every must be at least 1");
  for (Replica* r : ranks_) r->set_step_gate(this);
}

LockstepGroup::~LockstepGroup() {
  for (Replica* r : ranks_) r->set_step_gate(nullptr);
}

void LockstepGroup::wake() {
  // A step in flight: the group's next step comes at its end (end_step decides).
  if (busy_ || start_pending_) return;
  start_pending_ = true;
  events_.schedule_late(0, [this] { start_step(); });
}

bool LockstepGroup::any_unfinished() const {
  // The engines' has_unfinished_requests: admitted requests (a guard's queue is kvsim's front
  // end, not an engine's).
  for (const Replica* r : ranks_) {
    if (r->inflight() > 0) return true;
  }
  return false;
}

void LockstepGroup::start_step() {
  start_pending_ = false;
  // Every rank plans as its engine core would at this instant (run_busy_loop's step()).
  bool any = false;
  int64_t max_tokens = 1;  // a dummy forward's one token
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Replica& r = *ranks_[i];
    planned_[i] = !r.down() && r.prepare_gated_step();
    if (planned_[i]) {
      any = true;
      max_tokens = std::max(max_tokens, r.gated_tokens());
    }
  }
  // Nothing scheduled anywhere and the group paused: it stays idle (its engines' busy loops
  // skip the dummy forward when nothing is unfinished and the engines are not running).
  if (!any && !running_ && !any_unfinished()) return;
  if (!running_) {
    running_ = true;  // a new wave (START_DP_WAVE)
    step_counter_ = 0;
    ++stats_.waves;
  }
  // Every rank's batch under CUDA graphs, or none padded (one eager rank makes all eager).
  const bool padded = options_.cuda_graphs && max_tokens <= options_.graph_max_tokens;
  const int64_t pad_to = padded ? max_tokens : 1;
  // The expert layers see every rank's tokens (padding and dummy tokens too).
  int64_t group_tokens = 0;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    group_tokens += padded ? pad_to : planned_[i] ? ranks_[i]->gated_tokens() : 1;
  }
  SimTime step = 0;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Replica& r = *ranks_[i];
    if (!planned_[i]) ++stats_.dummy_forwards;
    step = std::max(step, planned_[i] ? r.lockstep_time(pad_to, group_tokens)
                                      : r.dummy_time(pad_to, group_tokens));
  }
  step += options_.sync;
  ++stats_.steps;
  busy_ = true;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (planned_[i]) ranks_[i]->launch_gated_step(step);
  }
  // Late: after every rank's iteration end at that instant.
  events_.schedule_late(step, [this] { end_step(); });
}

void LockstepGroup::end_step() {
  busy_ = false;
  // _has_global_unfinished_reqs: only every check_every-th step asks the group; in between the
  // engines take it that work remains.
  ++step_counter_;
  if (step_counter_ % options_.check_every == 0 && !any_unfinished()) {
    running_ = false;  // the wave ends (rank 0 reports wave_complete)
    step_counter_ = 0;
  }
  if (running_ || any_unfinished()) wake();
}

}  // namespace kvsim
