#include "sim/cluster/cluster_config.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace kvsim {

namespace {

// Labels go into CSV cells unquoted.
bool label_safe(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

constexpr int kMaxReplicas = 4096;

void parse_data_parallel(const ConfigNode& dp, ReplicaGroupConfig& group) {
  if (!dp.is_map()) dp.fail_expected("a map like {lockstep: auto, cuda_graphs: true}");
  using L = ReplicaGroupConfig::Lockstep;
  group.lockstep = dp.get_enum<L>(
      "lockstep", {{"auto", L::kAuto}, {"true", L::kOn}, {"false", L::kOff}}, L::kAuto);
  group.cuda_graphs = dp.get<bool>("cuda_graphs", true);
  group.dp_sync_us = dp.get<double>("sync_us", 0, {.min = 0, .max = 1e7});
  dp.reject_unknown_keys();
  group.data_parallel = dp;
}

// The replica groups of a `replicas:` list, checked: names, counts, roles (both halves of a
// disaggregated cluster or neither).
std::vector<ReplicaGroupConfig> parse_groups(const ConfigNode& groups) {
  std::vector<ReplicaGroupConfig> out;
  if (!groups.is_sequence() || groups.size() == 0) {
    groups.fail_expected("a non-empty list of replica groups");
  }
  std::map<std::string, int> seen;  // name -> line
  int replicas = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const ConfigNode g = groups.at(i);
    if (!g.is_map()) g.fail_expected("a replica group like {name: a100, count: 2}");
    ReplicaGroupConfig group;
    group.name = g.get<std::string>("name", fmt::format("group{}", i));
    if (!label_safe(group.name)) {
      g.child("name").fail("a group name is letters, digits, '_', '-' or '.'");
    }
    if (auto it = seen.find(group.name); it != seen.end()) {
      g.child("name").fail(fmt::format("duplicate replica group name '{}' (first at line {})",
                                       group.name, it->second));
    }
    seen.emplace(group.name, g.line());
    group.count = g.get<int>("count", 1, {.min = 1, .max = kMaxReplicas});
    group.role = g.get_enum("role", {"mixed", "prefill", "decode"}, std::string("mixed"));
    group.gpu = g.optional_child("gpu");
    group.model = g.optional_child("model");
    g.allow({"engine"});
    group.engine = g.peek("engine");
    if (group.engine && !group.engine->is_map())
      group.engine->fail_expected("a map of engine settings");
    if (auto dp = g.optional_child("data_parallel")) parse_data_parallel(*dp, group);
    replicas += group.count;
    out.push_back(std::move(group));
  }
  if (replicas > kMaxReplicas) {
    groups.fail(fmt::format("{} replicas in all; at most {}", replicas, kMaxReplicas));
  }
  // Disaggregation needs both halves: a prefill replica's requests must have somewhere to decode,
  // and arrivals somewhere to prefill.
  bool prefill = false, decode = false;
  for (const auto& grp : out) {
    prefill |= grp.role != "decode";
    decode |= grp.role != "prefill";
  }
  if (!decode)
    groups.fail("`role: prefill` groups need a `decode` or `mixed` group to hand off to");
  if (!prefill)
    groups.fail("`role: decode` groups need a `prefill` or `mixed` group to take arrivals");
  return out;
}

}  // namespace

int ClusterConfig::replicas() const {
  int n = 0;
  for (const auto& g : groups) n += g.count;
  return n;
}

std::vector<LockstepRanks> lockstep_groups(const ReplicaGroupConfig& g, bool moe,
                                           const EngineConfig& engine, size_t first) {
  using L = ReplicaGroupConfig::Lockstep;
  const int data_parallel = engine.data_parallel;
  if (g.lockstep == L::kOff) return {};
  const bool on = g.lockstep == L::kOn;
  if (data_parallel < 2 || g.count < data_parallel || g.count % data_parallel != 0) {
    if (!on) return {};
    g.data_parallel->child("lockstep")
        .fail(fmt::format(
            "lockstep needs the engine's data_parallel > 1 and a count that is a multiple of it "
            "(data_parallel {}, count {})",
            data_parallel, g.count));
  }
  // vLLM runs DPEngineCoreProc, the lockstep loop, for MoE models only.
  if (!on && !moe) return {};
  const int64_t decode_query =
      1 + (engine.speculative ? engine.speculative->num_speculative_tokens : 0);
  const int64_t graph_max = std::min<int64_t>(
      {engine.max_num_seqs * decode_query * 2, 512, engine.max_num_batched_tokens});
  std::vector<LockstepRanks> out;
  for (int start = 0; start < g.count; start += data_parallel) {
    LockstepRanks l{.options = {.cuda_graphs = g.cuda_graphs,
                                .graph_max_tokens = graph_max,
                                .sync = seconds_to_sim(g.dp_sync_us * 1e-6)}};
    for (int k = 0; k < data_parallel; ++k)
      l.ranks.push_back(first + static_cast<size_t>(start + k));
    out.push_back(std::move(l));
  }
  return out;
}

std::optional<ClusterConfig> cluster_config(const ConfigNode& root, const ConfigNode& policy) {
  policy.allow({"cluster"});
  const auto own = policy.peek("cluster");
  const auto section = root.optional_child("cluster");
  if (!section) {
    if (own) own->fail("a policy's `cluster:` needs a scenario `cluster:` section");
    return std::nullopt;
  }
  if (!section->is_map()) section->fail_expected("a map with `replicas:` and `router:`");
  ClusterConfig c{.router = ConfigNode::parse_string("{type: round_robin}", "default router")};
  c.groups = parse_groups(section->child("replicas"));
  if (auto t = section->optional_child("kv_transfer")) {
    if (!t->is_map()) t->fail_expected("a map like {gb_per_s: 50, latency_us: 20}");
    c.kv_transfer_gb_per_s =
        t->get<double>("gb_per_s", c.kv_transfer_gb_per_s, {.min = 1e-6, .max = 1e6});
    c.kv_transfer_latency_us =
        t->get<double>("latency_us", c.kv_transfer_latency_us, {.min = 0, .max = 1e9});
    t->reject_unknown_keys();
  }
  // The router maps are checked by make_router(); the section's other keys by the scenario's
  // final unknown-key check.
  section->allow({"router"});
  if (auto r = section->peek("router")) c.router = *r;
  if (own) {
    if (!own->is_map()) own->fail_expected("a map with `router:`");
    own->allow({"router", "replicas"});
    if (auto r = own->peek("router")) c.router = *r;
    // A policy may bring its own hardware: the colocated-vs-disaggregated comparison.
    if (auto g = own->peek("replicas")) c.groups = parse_groups(*g);
    own->reject_unknown_keys();
  }
  return c;
}

}  // namespace kvsim
