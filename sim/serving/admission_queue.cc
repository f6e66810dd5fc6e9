#include "sim/serving/admission_queue.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace kvsim {

namespace {

std::shared_ptr<spdlog::logger> admission_log() {
  auto l = spdlog::get("engine");
  return l ? l : spdlog::default_logger();
}

}  // namespace

AdmissionQueue::AdmissionQueue(EventQueue& events, GpuMemoryPool& pool,
                               std::vector<std::unique_ptr<Guard>> guards,
                               std::unordered_map<int64_t, RequestState>& requests, Hooks hooks)
    : events_(events),
      pool_(pool),
      guards_(std::move(guards)),
      requests_(requests),
      hooks_(std::move(hooks)) {}

GuardContext AdmissionQueue::guard_context(const MemorySnapshot& snap) const {
  // What KV can ever use, a fixed figure: a preallocated pool's size; through the caching
  // allocator, what torch may allocate less the activation peak the profile run found (an
  // iteration needs it beside the KV). Not the allocator's current segments, which grow and
  // shrink with use (a reserve guard read against them refused requests that fit).
  const KvBudget& b = pool_.budget();
  const int64_t budget = pool_.kv().preallocated()
                             ? pool_.kv().usage().capacity_bytes
                             : b.device_bytes_for_torch() - b.activation_peak_bytes;
  return GuardContext{.now = events_.now(),
                      .memory = snap,
                      .kv = pool_.kv(),
                      .inflight = hooks_.inflight(),
                      .kv_budget_bytes = budget};
}

bool AdmissionQueue::arrive(RequestState& r) {
  r.queued_at = events_.now();
  if (!queue_.empty()) {  // first come, first served: no overtaking the queue
    queue_.push_back(r.spec.id);
    if (const SimTime t = queue_behind_timeout(); t >= 0) r.guard_expires_at = r.queued_at + t;
    arm_timeout(r);
    if (hooks_.observe) hooks_.observe(r, RequestEventKind::kQueuedBehind);
    return false;
  }
  return try_admit(r);
}

SimTime AdmissionQueue::queue_behind_timeout() const {
  SimTime best = -1;
  for (const auto& g : guards_) {
    const std::optional<SimTime> t = g->queue_timeout();
    if (t && *t >= 0 && (best < 0 || *t < best)) best = *t;
  }
  return best;
}

bool AdmissionQueue::try_admit(RequestState& r) {
  const int64_t id = r.spec.id;
  if (!guards_.empty()) {
    const MemorySnapshot snap = pool_.snapshot();
    const GuardContext ctx = guard_context(snap);
    for (size_t i = 0; i < guards_.size(); ++i) {
      const Decision d = guards_[i]->check(r, ctx);
      using A = Decision::Action;
      if (d.action == A::kAdmit) continue;
      admission_log()->debug("t={:.6f}s req={} {}", sim_to_seconds(events_.now()), id, d.reason);
      if (d.action == A::kTruncate) {
        r.tokens_dropped += r.prompt_tokens - d.new_prompt_tokens;
        r.prompt_tokens = d.new_prompt_tokens;
        r.truncated = true;
        if (hooks_.guard_decided) hooks_.guard_decided(r, guards_[i]->type(), d);
        continue;
      }
      if (d.action == A::kQueue) {
        // Guards that already admitted (and reserved) let go: the request is re-checked whole.
        for (size_t j = 0; j < i; ++j) guards_[j]->on_release(r);
        if (r.phase != Phase::kGuardQueue ||
            std::find(queue_.begin(), queue_.end(), id) == queue_.end()) {
          r.phase = Phase::kGuardQueue;
          queue_.push_back(id);
          if (hooks_.guard_decided) hooks_.guard_decided(r, guards_[i]->type(), d);
        }
        // Queued on arrival, or behind others with no timeout: this guard's timeout applies.
        if (d.timeout >= 0 && r.guard_expires_at < 0) r.guard_expires_at = r.queued_at + d.timeout;
        arm_timeout(r);
        return false;
      }
      if (hooks_.guard_decided) hooks_.guard_decided(r, guards_[i]->type(), d);
      hooks_.finish(id, d.action == A::kReject ? Outcome::kRejected : Outcome::kRejectedTooLong);
      return false;
    }
  }
  if (auto it = std::find(queue_.begin(), queue_.end(), id); it != queue_.end()) queue_.erase(it);
  r.admitted_at = events_.now();
  if (hooks_.observe) hooks_.observe(r, RequestEventKind::kAdmitted);
  hooks_.admitted(r);
  arm_timeout(r);  // the guard's timeout no longer applies; a deadline still may
  return true;
}

void AdmissionQueue::arm_timeout(RequestState& r) {
  SimTime at = -1;
  auto earliest = [&at](SimTime t) {
    if (t >= 0 && (at < 0 || t < at)) at = t;
  };
  if (r.phase == Phase::kGuardQueue) earliest(r.guard_expires_at);
  if (!r.scheduled) earliest(r.deadline_at);
  if (at >= 0) at = std::max(events_.now(), at);  // at once if that is past
  if (r.timeout && r.timeout_at == at) return;
  cancel_timeout(r);
  if (at < 0) return;
  const int64_t id = r.spec.id;
  r.timeout_at = at;
  r.timeout = events_.schedule_at(at, [this, id] {
    auto it = requests_.find(id);
    if (it == requests_.end()) return;
    RequestState& q = it->second;
    q.timeout.reset();
    q.timeout_at = -1;
    const bool waiting =
        q.phase == Phase::kGuardQueue || (q.phase == Phase::kWaiting && !q.scheduled);
    if (!waiting) return;
    hooks_.finish(id, Outcome::kTimedOut);
    hooks_.timed_out();
  });
}

void AdmissionQueue::cancel_timeout(RequestState& r) {
  if (r.timeout) events_.cancel(*r.timeout);
  r.timeout.reset();
  r.timeout_at = -1;
}

void AdmissionQueue::on_scheduled(RequestState& r) {
  if (r.scheduled) return;
  r.scheduled = true;
  r.first_scheduled_at = events_.now();
  cancel_timeout(r);
}

void AdmissionQueue::run() {
  while (!queue_.empty()) {
    const int64_t id = queue_.front();
    RequestState& r = requests_.at(id);
    const size_t before = queue_.size();
    const bool admitted = try_admit(r);
    if (!admitted && queue_.size() == before && !queue_.empty() && queue_.front() == id) {
      break;  // still refused: the head blocks the queue
    }
  }
}

void AdmissionQueue::on_finish(RequestState& r) {
  for (auto& g : guards_) g->on_release(r);
  if (r.phase == Phase::kGuardQueue) {
    if (auto it = std::find(queue_.begin(), queue_.end(), r.spec.id); it != queue_.end()) {
      queue_.erase(it);
    }
  }
  cancel_timeout(r);
}

void AdmissionQueue::on_restart() {
  for (auto& g : guards_) g->on_restart();
}

AllocFit AdmissionQueue::check_allocation(const RequestState& r, int64_t tokens) const {
  for (const auto& g : guards_) {
    if (const AllocFit f = g->check_allocation(r, tokens, pool_.kv()); f != AllocFit::kOk) return f;
  }
  return AllocFit::kOk;
}

}  // namespace kvsim
