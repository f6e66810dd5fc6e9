// The scenario the sweep-plan tests expand their `sweep:` sections over: two policies, one with
// a KV guard, so that axes can reach into the policies' lists.
#pragma once

#include <string>

#include "core/config_node.h"
#include "sim/sweep/sweep_plan.h"

namespace kvsim::test {

inline constexpr const char* kSweepPlanBase = R"(name: t
model: llama-3-8b
gpu: a100-sxm4-80gb
engine: {kv: {type: paged, block_size: 16}}
workload: {rate: 1}
policies:
  - name: a
    guards: []
  - name: b
    guards: [{type: kv_guard, safety_margin_gb: 10}]
)";

// expand_sweep() of that scenario with `sweep` appended.
inline SweepPlan expand_over_base(const std::string& sweep) {
  return expand_sweep(ConfigNode::parse_string(std::string(kSweepPlanBase) + sweep, "s.yaml"));
}

}  // namespace kvsim::test
