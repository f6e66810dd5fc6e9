// The pass/fail test of a capacity search's probe (docs/capacity.md): bounds on a policy's
// summary figures, given as `--slo ttft_p99_s=2,tpot_p99_s=0.1` and `--min-availability`.
//   <ttft|tpot|e2e>_<p50|p90|p99|mean>_s=X   that latency figure (completed requests) <= X
//   slo_attainment=X                          the scenario `slo:` block's attainment >= X
//   availability=X                            the same as --min-availability X
// A probe with no completed request fails (its latency figures are empty, not 0).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvsim {

struct CapacityCriterion {
  struct Bound {
    std::string text;    // as written: "ttft_p99_s=2"
    std::string metric;  // summary.json key: "ttft_s", ... or "slo_attainment", "availability"
    std::string stat;    // "p99", ... ("" for attainment / availability)
    double limit = 0;
    bool at_least = false;  // >= limit (attainment, availability) rather than <=
  };
  std::vector<Bound> bounds;

  // One policy object of summary.json: does it meet every bound? `why` gets the first bound
  // missed ("ttft_p99_s 2.41 > 2").
  bool met(const nlohmann::json& policy, std::string* why = nullptr) const;
  std::string text() const;  // the bounds, comma-separated
};

// Parses `--slo` (comma-separated terms) and adds availability >= min_availability when
// min_availability > 0. Throws InputError naming the bad term.
CapacityCriterion parse_capacity_criterion(const std::string& slo, double min_availability);

}  // namespace kvsim
