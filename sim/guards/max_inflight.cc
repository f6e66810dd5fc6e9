// max_inflight: at most N admitted requests at once; the rest queue (or are rejected).
#include <fmt/format.h>

#include "core/config_node.h"
#include "sim/guards/guard_makers.h"

namespace kvsim {

namespace {

class MaxInflightGuard final : public Guard {
 public:
  explicit MaxInflightGuard(const ConfigNode& c)
      : limit_(c.get<int64_t>("max_inflight", {.min = 1, .max = 1e9})),
        queue_(c.get_enum<bool>("on_fail", {{"queue", true}, {"reject", false}}, true)),
        timeout_(read_timeout(c)) {}
  std::string_view type() const override { return "max_inflight"; }
  std::optional<SimTime> queue_timeout() const override {
    return queue_ ? std::optional<SimTime>(timeout_) : std::nullopt;
  }

  Decision check(const RequestState&, const GuardContext& ctx) override {
    if (ctx.inflight < limit_) return Decision::admit();
    Decision d;
    d.action = queue_ ? Decision::Action::kQueue : Decision::Action::kReject;
    d.timeout = timeout_;
    d.reason = fmt::format("max_inflight: {} requests in flight", ctx.inflight);
    return d;
  }

 private:
  int64_t limit_;
  bool queue_;  // on_fail: queue (else reject)
  SimTime timeout_;
};

}  // namespace

std::unique_ptr<Guard> make_max_inflight_guard(const ConfigNode& c, const ModelSpec&) {
  return std::make_unique<MaxInflightGuard>(c);
}

}  // namespace kvsim
