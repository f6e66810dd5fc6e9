// vLLM's BlockSpaceManager admission (facts.md §1.3): a prompt is admitted when the free blocks
// left after it stay above watermark x total blocks (OK), waits otherwise (LATER), and is
// rejected when even an empty pool could not keep the watermark (NEVER). Paged stores only.
#include <fmt/format.h>

#include "core/config_node.h"
#include "sim/guards/guard_makers.h"

namespace kvsim {

namespace {

class WatermarkGuard final : public Guard {
 public:
  explicit WatermarkGuard(const ConfigNode& c)
      : watermark_(c.get<double>("watermark", 0.01, {.min = 0, .max = 1})), timeout_(read_timeout(c)) {}
  std::string_view type() const override { return "watermark"; }
  std::optional<SimTime> queue_timeout() const override { return timeout_; }

  Decision check(const RequestState& r, const GuardContext& ctx) override {
    const PagedBlocks* paged = ctx.kv.paged();
    if (paged == nullptr) return Decision::admit();  // not a paged store: nothing to watch
    const int64_t bt = paged->block_tokens();
    const int64_t need = (r.prompt_tokens + bt - 1) / bt;
    const auto mark = static_cast<int64_t>(watermark_ * static_cast<double>(paged->total_blocks()));
    Decision d;
    if (paged->total_blocks() - need < mark) {
      d.action = Decision::Action::kRejectTooLong;
      d.reason = fmt::format("watermark: {} blocks can never fit above the watermark", need);
    } else if (paged->free_blocks() - need < mark) {
      d.action = Decision::Action::kQueue;
      d.timeout = timeout_;
      d.reason = "watermark: not enough free blocks now";
    }
    return d;
  }

 private:
  double watermark_;
  SimTime timeout_;
};

}  // namespace

std::unique_ptr<Guard> make_watermark_guard(const ConfigNode& c, const ModelSpec&) {
  return std::make_unique<WatermarkGuard>(c);
}

}  // namespace kvsim
