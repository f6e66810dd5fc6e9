// Worst-case reservation: admit only when prompt + max output tokens of every admitted request
// fit in the KV budget at once, so admitted requests can never run out of KV memory. Queues (with
// an optional timeout) what does not fit now; rejects what could never fit.
#include <limits>
#include <map>

#include <fmt/format.h>

#include "core/config_node.h"
#include "core/units.h"
#include "sim/guards/guard_makers.h"

namespace kvsim {

namespace {

class ReserveGuard final : public Guard {
 public:
  explicit ReserveGuard(const ConfigNode& c)
      : queue_(c.get_enum<bool>("on_fail", {{"queue", true}, {"reject", false}}, true)),
        timeout_(read_timeout(c)) {}
  std::string_view type() const override { return "reserve"; }
  std::optional<SimTime> queue_timeout() const override {
    return queue_ ? std::optional<SimTime>(timeout_) : std::nullopt;
  }

  Decision check(const RequestState& r, const GuardContext& ctx) override {
    const int64_t need = worst_case_bytes(r, ctx.kv);
    Decision d;
    if (need > ctx.kv_budget_bytes) {
      d.action = Decision::Action::kRejectTooLong;
      d.reason = fmt::format("reserve: worst case {} bytes exceeds the KV budget {}", need,
                             ctx.kv_budget_bytes);
      return d;
    }
    if (reserved_ + need > ctx.kv_budget_bytes) {
      d.action = queue_ ? Decision::Action::kQueue : Decision::Action::kReject;
      d.timeout = timeout_;
      d.reason = "reserve: worst case does not fit beside the admitted requests";
      return d;
    }
    reserved_ += need;
    held_[r.spec.id] = need;
    return Decision::admit();
  }

  bool rechecks_each_iteration() const override { return false; }
  void on_release(const RequestState& r) override {
    if (auto it = held_.find(r.spec.id); it != held_.end()) {
      reserved_ -= it->second;
      held_.erase(it);
    }
  }
  void on_restart() override {
    held_.clear();
    reserved_ = 0;
  }

 private:
  static int64_t worst_case_bytes(const RequestState& r, const KvStore& kv) {
    int64_t tokens = r.max_total_tokens();
    if (const PagedBlocks* paged = kv.paged()) {  // whole blocks
      const int64_t bt = paged->block_tokens();
      tokens = (tokens + bt - 1) / bt * bt;
    }
    // Saturates: a request too long for any GPU must be rejected, not overflow on the way.
    return checked_mul(tokens, kv.kv_bytes_per_token())
        .value_or(std::numeric_limits<int64_t>::max());
  }

  bool queue_;
  SimTime timeout_;
  int64_t reserved_ = 0;
  std::map<int64_t, int64_t> held_;
};

}  // namespace

std::unique_ptr<Guard> make_reserve_guard(const ConfigNode& c, const ModelSpec&) {
  return std::make_unique<ReserveGuard>(c);
}

}  // namespace kvsim
