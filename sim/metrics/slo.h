// Service-level objectives: per-request latency bounds a run scores its policies against
// (`slo: {ttft_s, tpot_s, e2e_s}` at the top level, a policy's own `slo:` merged over it).
#pragma once

#include <optional>

#include "core/config_node.h"

namespace kvsim {

struct RequestState;

// An absent bound is no bound on that figure.
struct SloBounds {
  std::optional<double> ttft_s;
  std::optional<double> tpot_s;
  std::optional<double> e2e_s;

  // Whether a served request with these latencies meets every bound. A request with no TPOT (one
  // output token) meets any TPOT bound, as in vLLM's benchmark (its TPOT counts as 0 there).
  bool met(double ttft, std::optional<double> tpot, double e2e) const;
};

// The SLO of `policy`: the scenario's top-level `slo:` with the policy's `slo:` keys on top (a
// policy key replaces the top-level one); nullopt when neither is given. Every key is checked:
// a bound must be a number > 0; a bad one is a ConfigError naming file:line:col.
std::optional<SloBounds> policy_slo(const ConfigNode& root, const ConfigNode& policy);

}  // namespace kvsim
