#include "sim/metrics/slo.h"

#include <vector>

namespace kvsim {

bool SloBounds::met(double ttft, std::optional<double> tpot, double e2e) const {
  if (ttft_s && ttft > *ttft_s) return false;
  if (tpot_s && tpot && *tpot > *tpot_s) return false;
  if (e2e_s && e2e > *e2e_s) return false;
  return true;
}

std::optional<SloBounds> policy_slo(const ConfigNode& root, const ConfigNode& policy) {
  policy.allow({"slo"});  // read here, through the merged map (as a policy's `engine:`)
  std::vector<ConfigNode> layers;
  for (const std::optional<ConfigNode>& layer : {root.peek("slo"), policy.peek("slo")}) {
    if (!layer) continue;
    if (!layer->is_map()) layer->fail_expected("a map of SLO bounds {ttft_s, tpot_s, e2e_s}");
    layers.push_back(*layer);
  }
  if (layers.empty()) return std::nullopt;
  const ConfigNode slo = ConfigNode::merge(layers, policy);
  const Bounds positive{.min = 0, .min_exclusive = true};
  SloBounds b;
  b.ttft_s = slo.get_optional<double>("ttft_s", positive);
  b.tpot_s = slo.get_optional<double>("tpot_s", positive);
  b.e2e_s = slo.get_optional<double>("e2e_s", positive);
  slo.reject_unknown_keys();
  return b;
}

}  // namespace kvsim
