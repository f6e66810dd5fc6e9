// Seed A's AttentionKVCacheGuard, faithful to its code:
//   estimate = 2 (K,V) x 2 bytes (FP16, hard-coded) x batch x target_len x its OWN num_layers x
//              num_heads x head_dim  (defaults 32/32/128 whatever the real model is)
//   free     = cudaMemGetInfo free: memory cached by the allocator counts as used
//   fail when free - estimate < safety_margin
// On failure: reject (429), truncate (keep the first system_tokens and the most recent tokens, to
// max_safe_len, or to an adaptive length computed from the budget), or queue.
// The seed's truncation does not re-check: a prompt already within max_safe_len passes as is.
#include <algorithm>

#include <fmt/format.h>

#include "core/config_node.h"
#include "core/units.h"
#include "sim/guards/guard_makers.h"

namespace kvsim {

namespace {

class KvGuard final : public Guard {
 public:
  explicit KvGuard(const ConfigNode& c)
      : layers_(c.get<int64_t>("num_layers", 32, {.min = 1, .max = 1000})),
        heads_(c.get<int64_t>("num_heads", 32, {.min = 1, .max = 4096})),
        head_dim_(c.get<int64_t>("head_dim", 128, {.min = 1, .max = 4096})),
        dtype_bytes_(c.get<int64_t>("dtype_bytes", 2, {.min = 1, .max = 8})),
        margin_bytes_(gib_to_bytes(c.get<double>("safety_margin_gb", 8.0, {.min = 0, .max = 1e6}))),
        on_fail_(c.get_enum<OnFail>("on_fail",
                                    {{"reject", OnFail::kReject},
                                     {"truncate", OnFail::kTruncate},
                                     {"queue", OnFail::kQueue}},
                                    OnFail::kReject)),
        system_tokens_(c.get<int64_t>("system_tokens", 128, {.min = 0, .max = 1e9})),
        estimate_batch_(c.get_enum<Batch>(
            "estimate_batch", {{"request", Batch::kRequest}, {"inflight", Batch::kInflight}},
            Batch::kRequest)),
        target_(c.get_enum<Target>(
            "target",
            {{"prompt", Target::kPrompt}, {"prompt_plus_output", Target::kPromptPlusOutput}},
            Target::kPrompt)),
        timeout_(read_timeout(c)) {
    // The seed's max_gpu_memory_gb is stored but never used by its check; accept it for fidelity.
    c.get<double>("max_gpu_memory_gb", 80.0, {.min = 0, .max = 1e6});
    if (const auto m = c.optional_child("max_safe_len")) {
      if (m->is_scalar() && m->as<std::string>() == "adaptive") {
        adaptive_ = true;
      } else {
        max_safe_len_ = m->as<int64_t>({.min = 1, .max = 1e12});
      }
    }
  }

  std::string_view type() const override { return "kv_guard"; }
  std::optional<SimTime> queue_timeout() const override {
    return on_fail_ == OnFail::kQueue ? std::optional<SimTime>(timeout_) : std::nullopt;
  }

  Decision check(const RequestState& r, const GuardContext& ctx) override {
    const int64_t batch = estimate_batch_ == Batch::kInflight ? ctx.inflight + 1 : 1;
    const int64_t target = target_ == Target::kPrompt ? r.prompt_tokens : r.max_total_tokens();
    const int64_t per_token = 2 * dtype_bytes_ * layers_ * heads_ * head_dim_;
    const int64_t estimate = per_token * batch * target;
    const int64_t free = ctx.memory.driver_free_bytes;
    if (free - estimate >= margin_bytes_) return Decision::admit();
    Decision d;
    d.reason = fmt::format("kv_guard: free {:.2f} GiB - estimate {:.2f} GiB < margin {:.2f} GiB",
                           to_gib(free), to_gib(estimate), to_gib(margin_bytes_));
    if (on_fail_ == OnFail::kReject) {
      d.action = Decision::Action::kReject;
    } else if (on_fail_ == OnFail::kQueue) {
      d.action = Decision::Action::kQueue;
      d.timeout = timeout_;
    } else {
      int64_t keep = max_safe_len_;
      if (adaptive_) keep = (free - margin_bytes_) / std::max<int64_t>(1, per_token * batch);
      if (keep <= system_tokens_) {
        d.action = Decision::Action::kReject;  // no room even for the system prompt
      } else if (r.prompt_tokens > keep) {
        d.action = Decision::Action::kTruncate;
        d.new_prompt_tokens = keep;
      } else {
        return Decision::admit();  // the seed truncates only prompts longer than max_safe_len
      }
    }
    return d;
  }

  bool rechecks_each_iteration() const override { return true; }

 private:
  enum class OnFail { kReject, kTruncate, kQueue };
  enum class Batch { kRequest, kInflight };  // estimate for this request alone, or all in flight
  enum class Target { kPrompt, kPromptPlusOutput };

  int64_t layers_, heads_, head_dim_, dtype_bytes_, margin_bytes_;
  OnFail on_fail_;
  int64_t system_tokens_;
  Batch estimate_batch_;
  Target target_;
  SimTime timeout_;
  int64_t max_safe_len_ = 16384;
  bool adaptive_ = false;
};

}  // namespace

std::unique_ptr<Guard> make_kv_guard(const ConfigNode& c, const ModelSpec&) {
  return std::make_unique<KvGuard>(c);
}

}  // namespace kvsim
