// RunQueues' side of KV offloading (engine.kv_offloading): a waiting request whose prefix the CPU
// tier holds past its GPU prefix hit gets its KV for the computed and loaded tokens and waits,
// unscheduled, while the load runs (vLLM V1's Scheduler.schedule: a request whose connector
// reports load_kv_async tokens is allocated them and set to WAITING_FOR_REMOTE_KVS); when the
// load ends it waits again, its prefix cached on the GPU (_update_waiting_for_remote_kv).
#include "core/check.h"
#include "sim/serving/run_queues.h"

namespace kvsim {

RunQueues::LoadStart RunQueues::offload_first(RequestState& r, const PrefixHashes& prefix,
                                              int64_t cached, int64_t target, bool nothing_else) {
  if (!hooks_.offload_match || r.offload_loaded) return LoadStart::kNone;
  const int64_t hit = hooks_.offload_match(r, cached, target);
  if (hit == 0) return LoadStart::kNone;
  const LoadStart s = start_load(r, prefix, cached, hit, target, nothing_else);
  if (s == LoadStart::kNever) hooks_.finish(r.spec.id, Outcome::kRejectedTooLong);
  return s;
}

void RunQueues::count_lookup(RequestState& r, int64_t target, int64_t cached, int64_t hit) {
  // Counted at admission, for requests never preempted, as vLLM's PrefixCacheStats (a
  // recompute's lookup goes to its separate preempted_* figures, which kvsim does not report); a
  // request whose prefix was loaded is counted when its load starts.
  if (r.preemptions == 0 && !r.offload_loaded) {
    recorder_.on_prefix_lookup(target, cached, cached / pool_.kv().paged()->block_tokens());
    if (hooks_.offload_match) recorder_.on_offload_lookup(target - cached, hit);
  }
  r.offload_loaded = false;  // a recompute after a preemption looks the tier up again
}

RunQueues::LoadStart RunQueues::start_load(RequestState& r, const PrefixHashes& prefix,
                                           int64_t cached, int64_t hit, int64_t target,
                                           bool nothing_else) {
  const int64_t id = r.spec.id;
  const AllocResult a =
      pool_.allocate_kv(id, cached + hit, std::max(r.max_total_tokens(), target), prefix);
  if (!a) return nothing_else ? LoadStart::kNever : LoadStart::kWait;
  waiting_->pop_front();
  KvLedger::forget(r);
  r.phase = Phase::kLoading;
  count_lookup(r, target, cached, hit);
  r.offload_loaded = true;
  ++loading_;
  hooks_.offload_load(r, cached, hit);
  return LoadStart::kStarted;
}

void RunQueues::loaded(RequestState& r) {
  KVSIM_CHECK(r.phase == Phase::kLoading, "request {} loaded while not loading", r.spec.id);
  --loading_;
  ledger_.release(r);
  r.phase = Phase::kWaiting;
  waiting_->add(r.spec.id, true);
}

}  // namespace kvsim
