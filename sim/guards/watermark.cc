// vLLM V0's free-block watermark (BlockSpaceManager.can_allocate in vllm/core/block_manager.py):
// with M = floor(watermark x total blocks) and `need` the blocks of the tokens being allocated,
//   NEVER  total - need < M  (even an empty pool could not keep the mark): rejected_too_long
//   LATER  free - need < M   (not now): the request keeps its place and admission stops
//   OK     otherwise.
// vLLM asks this in its scheduler, each time it is about to allocate a waiting request (a new one
// or one preempted to recompute), against the free blocks left by the allocations already made in
// the same step; so does kvsim by default (`check_at: schedule`, through
// Guard::check_allocation). `check_at: arrival` keeps kvsim's earlier variant, a guard consulted
// once at arrival against the free blocks of that moment, with the guard queue and its timeout_s:
// requests arriving within one iteration all pass it, nothing is reserved, and a preempted
// request comes back unchecked. Paged stores only.
#include <fmt/format.h>

#include "core/config_node.h"
#include "sim/guards/guard_makers.h"

namespace kvsim {

namespace {

enum class CheckAt { kSchedule, kArrival };

class WatermarkGuard final : public Guard {
 public:
  explicit WatermarkGuard(const ConfigNode& c)
      : watermark_(c.get<double>("watermark", 0.01, {.min = 0, .max = 1})),
        at_(c.get_enum<CheckAt>("check_at",
                                {{"schedule", CheckAt::kSchedule}, {"arrival", CheckAt::kArrival}},
                                CheckAt::kSchedule)) {
    if (at_ == CheckAt::kSchedule) {
      if (c.has("timeout_s")) {
        c.child("timeout_s")
            .fail(
                "applies only with check_at: arrival (the scheduler-side watermark holds "
                "requests in the engine's waiting queue, not in a guard queue)");
      }
      timeout_ = -1;
    } else {
      timeout_ = read_timeout(c);
    }
  }
  std::string_view type() const override { return "watermark"; }
  std::optional<SimTime> queue_timeout() const override {
    return at_ == CheckAt::kArrival ? std::optional<SimTime>(timeout_) : std::nullopt;
  }

  Decision check(const RequestState& r, const GuardContext& ctx) override {
    if (at_ != CheckAt::kArrival) return Decision::admit();
    Decision d;
    switch (fit(r.prompt_tokens, ctx.kv)) {
      case AllocFit::kOk: break;
      case AllocFit::kNever:
        d.action = Decision::Action::kRejectTooLong;
        d.reason = "watermark: the prompt can never fit above the watermark";
        break;
      case AllocFit::kLater:
        d.action = Decision::Action::kQueue;
        d.timeout = timeout_;
        d.reason = "watermark: not enough free blocks now";
        break;
    }
    return d;
  }

  AllocFit check_allocation(const RequestState& /*r*/, int64_t tokens,
                            const KvStore& kv) const override {
    return at_ == CheckAt::kSchedule ? fit(tokens, kv) : AllocFit::kOk;
  }

 private:
  AllocFit fit(int64_t tokens, const KvStore& kv) const {
    const PagedBlocks* paged = kv.paged();
    if (paged == nullptr) return AllocFit::kOk;  // not a paged store: nothing to watch
    // A block per block_size tokens in each KV cache group (one group for a dense model).
    const int64_t need = paged->blocks_to_allocate(PrefixHashes{}, tokens);
    const auto mark = static_cast<int64_t>(watermark_ * static_cast<double>(paged->total_blocks()));
    if (paged->total_blocks() - need < mark) return AllocFit::kNever;
    if (paged->free_blocks() - need < mark) return AllocFit::kLater;
    return AllocFit::kOk;
  }

  double watermark_;
  CheckAt at_;
  SimTime timeout_ = -1;
};

}  // namespace

std::unique_ptr<Guard> make_watermark_guard(const ConfigNode& c, const ModelSpec&) {
  return std::make_unique<WatermarkGuard>(c);
}

}  // namespace kvsim
