// Admission guards: small policies consulted when a request arrives (and, for those that say so,
// again every iteration while it waits in their queue). Composable: a policy lists several and
// the first that does not admit decides. A guard may also contribute a check the scheduler makes
// itself, each time it is about to allocate KV for a waiting request (check_allocation: vLLM's
// watermark is one).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sim_time.h"
#include "models/gpu_spec.h"
#include "models/memory/kv_capabilities.h"
#include "models/memory/kv_store.h"
#include "models/memory/memory_snapshot.h"
#include "models/model_spec.h"
#include "sim/request/request_state.h"

namespace kvsim {

class ConfigNode;

// What a guard sees of the replica at the moment it decides.
struct GuardContext {
  SimTime now = 0;
  const MemorySnapshot& memory;
  const KvStore& kv;
  int64_t inflight = 0;         // admitted and not finished (waiting, running, swapped)
  int64_t kv_budget_bytes = 0;  // bytes the KV store can ever use (paged pool, arena, allocator)
};

struct Decision {
  enum class Action { kAdmit, kReject, kRejectTooLong, kTruncate, kQueue };
  Action action = Action::kAdmit;
  int64_t new_prompt_tokens = 0;  // kTruncate: the prompt length to keep
  SimTime timeout = -1;           // kQueue: how long it may wait (-1 = forever)
  std::string reason;             // one line for the log

  static Decision admit() { return {}; }
};

// What a scheduler-side check answers, as vLLM V0's BlockSpaceManager.can_allocate does: allocate
// now (kOk), not in this step (kLater: admission stops, the request keeps its place), or never
// (kNever: even an empty KV store could not take it; it ends as rejected_too_long).
enum class AllocFit { kOk, kLater, kNever };

class Guard {
 public:
  virtual ~Guard() = default;
  virtual std::string_view type() const = 0;
  // Decides for `r`, whose prompt may already have been truncated by an earlier guard.
  virtual Decision check(const RequestState& r, const GuardContext& ctx) = 0;
  // How long a request this guard queues may wait (-1 = forever); nullopt when the guard never
  // queues (on_fail other than queue). A request arriving behind a non-empty guard queue is not
  // checked until it reaches the head, so it waits with the policy's shortest such timeout.
  virtual std::optional<SimTime> queue_timeout() const { return std::nullopt; }
  // Whether a queued request is re-checked each iteration (else only when memory is released).
  virtual bool rechecks_each_iteration() const { return true; }
  // The request finished or was dropped after this guard admitted it (reservations end here).
  virtual void on_release(const RequestState& /*r*/) {}
  // The replica crashed and restarted: forget every reservation.
  virtual void on_restart() {}
  // The scheduler is about to allocate KV for `tokens` tokens of `r`, a waiting request (new, or
  // preempted to recompute); `kv` is the store as this step's earlier allocations left it. Guards
  // that act only at arrival keep the default.
  virtual AllocFit check_allocation(const RequestState& /*r*/, int64_t /*tokens*/,
                                    const KvStore& /*kv*/) const {
    return AllocFit::kOk;
  }
};

// Builds a policy's `guards:` list ([] or absent = no guard) through the guard registry
// (guard_registry.h). `kv_type` is the policy's engine.kv.type: a guard needing a capability its
// store lacks is a ConfigError at the guard's `type:`. Throws ConfigError.
std::vector<std::unique_ptr<Guard>> make_guards(const ConfigNode& list, const ModelSpec& model,
                                                const std::string& kv_type);

}  // namespace kvsim
