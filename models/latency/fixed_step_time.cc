#include "models/latency/fixed_step_time.h"

#include "core/config_node.h"

namespace kvsim {

DecodeStepFixed FixedStepTime::decode_step(DecodeStepFixed modeled, int64_t n) const {
  // duration_ns(t) = (ns_a + ns_b t + half) >> shift: with ns_b = 0 and ns_a an exact multiple
  // of 2^shift, it is that many ns for every t (the half never carries).
  modeled.ns_a = static_cast<Int128>(fixed_ns + (per_token_ns + per_seq_ns) * n)
                 << DecodeStepFixed::kNsShift;
  modeled.ns_b = 0;
  return modeled;
}

FixedStepTime parse_fixed_step_time(const ConfigNode& node) {
  if (!node.is_map()) node.fail_expected("a step_time map {fixed_s, per_token_s, per_seq_s}");
  const auto ns = [&](const char* key) {
    return seconds_to_sim(node.get<double>(key, 0.0, {.min = 0, .max = 1e3}));
  };
  FixedStepTime t{
      .fixed_ns = ns("fixed_s"), .per_token_ns = ns("per_token_s"), .per_seq_ns = ns("per_seq_s")};
  if (t.fixed_ns == 0 && t.per_token_ns == 0 && t.per_seq_ns == 0) {
    node.fail("a step time needs fixed_s, per_token_s or per_seq_s above 0 ns");
  }
  return t;
}

}  // namespace kvsim
