// max_model_len: a request whose prompt + output exceeds the limit is rejected (vLLM's 400) or
// its prompt is truncated to fit (keeping the most recent tokens).
#include <fmt/format.h>

#include "core/config_node.h"
#include "sim/guards/guard_makers.h"

namespace kvsim {

namespace {

class MaxModelLenGuard final : public Guard {
 public:
  MaxModelLenGuard(const ConfigNode& c, const ModelSpec& model)
      : max_len_(c.get<int64_t>("max_model_len", model.max_position, {.min = 1, .max = 1e12})),
        truncate_(c.get_enum<bool>("on_fail", {{"reject", false}, {"truncate", true}}, false)) {}
  std::string_view type() const override { return "max_model_len"; }

  Decision check(const RequestState& r, const GuardContext&) override {
    if (r.max_total_tokens() <= max_len_) return Decision::admit();
    Decision d;
    const int64_t keep = max_len_ - r.spec.output_tokens;
    d.reason = fmt::format("max_model_len: {} + {} tokens > {}", r.prompt_tokens,
                           r.spec.output_tokens, max_len_);
    if (truncate_ && keep >= 1) {
      d.action = Decision::Action::kTruncate;
      d.new_prompt_tokens = keep;
    } else {
      d.action = Decision::Action::kRejectTooLong;
    }
    return d;
  }
  bool rechecks_each_iteration() const override { return false; }

 private:
  int64_t max_len_;
  bool truncate_;  // on_fail: truncate (else reject)
};

}  // namespace

std::unique_ptr<Guard> make_max_model_len_guard(const ConfigNode& c, const ModelSpec& model) {
  return std::make_unique<MaxModelLenGuard>(c, model);
}

}  // namespace kvsim
