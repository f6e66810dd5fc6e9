#include "workloads/workload.h"

#include <fmt/format.h>

#include "core/config_node.h"
#include "workloads/generators/open_loop.h"

namespace kvsim {

namespace {

struct Common {
  LengthDist prompt_tokens = LengthDist::fixed(1);
  LengthDist output_tokens = LengthDist::fixed(1);
  std::optional<SimTime> duration;
  std::optional<int64_t> max_requests;
  std::vector<Burst> bursts;
  RequestTags tags;
};

Common parse_common(const ConfigNode& n) {
  Common c;
  c.prompt_tokens = LengthDist::parse(n.child("prompt_tokens"));
  c.output_tokens = LengthDist::parse(n.child("output_tokens"));
  const Bounds positive_s{.min = 0, .max = 1e9, .min_exclusive = true};
  if (auto d = n.get_optional<double>("duration_s", positive_s)) {
    c.duration = seconds_to_sim(*d);
  }
  c.max_requests = n.get_optional<int64_t>("max_requests", {.min = 1, .max = 1e12});
  c.tags.priority = n.get<int64_t>("priority", 0, {.min = -1e15, .max = 1e15});
  if (auto q = n.get_optional<double>("max_queue_time_s", positive_s)) {
    c.tags.max_queue_time = seconds_to_sim(*q);
  }
  if (auto b = n.optional_child("bursts")) {
    if (!b->is_sequence()) b->fail_expected("a list of bursts");
    for (size_t i = 0; i < b->size(); ++i) {
      ConfigNode bn = b->at(i);
      c.bursts.push_back(Burst::parse(bn));
      if (c.duration && c.bursts.back().at >= *c.duration) {
        bn.child("at_s").fail_expected(
            fmt::format("a time before duration_s ({} s)", sim_to_seconds(*c.duration)));
      }
    }
  }
  return c;
}

Workload make_open_loop(const ConfigNode& n, uint64_t seed) {
  OpenLoopParams p;
  p.arrivals = ArrivalProcess::parse(n.child("arrivals"));
  Common c = parse_common(n);
  if (!c.duration && !c.max_requests) {
    n.fail("open-loop arrivals need duration_s or max_requests (or both), or they never end");
  }
  p.prompt_tokens = c.prompt_tokens;
  p.output_tokens = c.output_tokens;
  p.duration = c.duration;
  p.max_requests = c.max_requests;
  p.bursts = std::move(c.bursts);
  p.tags = c.tags;
  Workload w;
  w.kind = Workload::Kind::kOpenLoop;
  w.source = std::make_unique<OpenLoopSource>(std::move(p), seed);
  return w;
}

// fan_out: {every: N | probability: p, width: k, turns: m, turn_tokens: L[, output_tokens: L,
// think_s: T]} (workloads/generators/fan_out.h).
FanOutParams parse_fan_out(const ConfigNode& f) {
  if (!f.is_map())
    f.fail_expected("fan_out {every: N or probability: p, width: k, turn_tokens: L}");
  FanOutParams p;
  if (f.has("every") == f.has("probability")) f.fail("give exactly one of every: or probability:");
  p.every = f.get<int64_t>("every", 0, {.min = 1, .max = 1e9});
  p.probability = f.get<double>("probability", 0.0, {.min = 0, .max = 1});
  p.width = f.get<int64_t>("width", {.min = 1, .max = 1e4});
  p.turns = f.get<int64_t>("turns", 1, {.min = 1, .max = 1e6});
  p.turn_tokens = LengthDist::parse(f.child("turn_tokens"));
  if (auto o = f.optional_child("output_tokens")) p.output_tokens = LengthDist::parse(*o);
  p.think = seconds_to_sim(f.get<double>("think_s", 0.0, {.min = 0, .max = 1e9}));
  return p;
}

// clients {type: sessions, ...}'s own keys (workloads/generators/sessions.h).
SessionParams parse_sessions(const ConfigNode& cl) {
  SessionParams s;
  s.turns = cl.get<int64_t>("turns", {.min = 1, .max = 1e9});
  s.turn_tokens = LengthDist::parse(cl.child("turn_tokens"));
  s.tool_share = cl.get<double>("tool_share", 0.0, {.min = 0, .max = 1});
  s.tool_gap = seconds_to_sim(cl.get<double>("tool_s", 0.0, {.min = 0, .max = 1e9}));
  s.hash_block_tokens = cl.get<int64_t>("hash_block_tokens", 16, {.min = 1, .max = 1e6});
  s.max_context_tokens = cl.get<int64_t>("max_context_tokens", 0, {.min = 0, .max = 1e9});
  if (auto f = cl.optional_child("fan_out")) s.fan_out = parse_fan_out(*f);
  return s;
}

Workload make_closed_loop(const ConfigNode& n, uint64_t seed) {
  ConfigNode cl = n.child("clients");
  if (!cl.is_map()) cl.fail_expected("clients {type: closed_loop, count: N, think_s: T}");
  const bool sessions = cl.get_enum("type", {"closed_loop", "sessions"}) == "sessions";
  ClosedLoopParams p;
  if (sessions) p.sessions = parse_sessions(cl);
  p.count = cl.get<int>("count", {.min = 1, .max = 1e6});
  p.think = seconds_to_sim(cl.get<double>("think_s", 0.0, {.min = 0, .max = 1e9}));
  p.exponential_think =
      cl.get_enum<bool>("think", {{"fixed", false}, {"exponential", true}}, false);
  p.stagger = seconds_to_sim(cl.get<double>("stagger_s", 0.0, {.min = 0, .max = 1e9}));
  Common c = parse_common(n);
  if (!c.duration && !c.max_requests) {
    n.fail("closed-loop clients need duration_s or max_requests (or both), or they never end");
  }
  if (c.max_requests && *c.max_requests < p.count) {
    n.child("max_requests")
        .fail_expected(fmt::format("at least one request per client (>= {})", p.count));
  }
  p.prompt_tokens = c.prompt_tokens;
  p.output_tokens = c.output_tokens;
  p.duration = c.duration;
  p.max_requests = c.max_requests;
  p.tags = c.tags;
  auto ids = std::make_shared<int64_t>(0);
  Workload w;
  w.kind = Workload::Kind::kClosedLoop;
  w.clients = std::make_unique<ClosedLoopClients>(std::move(p), seed, ids);
  if (!c.bursts.empty()) {
    OpenLoopParams b;
    b.bursts = std::move(c.bursts);
    b.tags = c.tags;  // bursts without their own priority / max_queue_time_s take the workload's
    w.source = std::make_unique<OpenLoopSource>(std::move(b), seed, ids);
  }
  return w;
}

Workload make_trace(const ConfigNode& n, uint64_t) {
  TraceOptions o = parse_trace_options(n.child("trace"));
  n.reject_unknown_keys();  // before opening the file, as for the other kinds' keys
  Workload w;
  w.kind = Workload::Kind::kTrace;
  w.trace_counters = o.counters;
  w.source = open_trace(o);
  return w;
}

}  // namespace

void register_workload_kinds(WorkloadKindRegistry& r) {
  const std::vector<std::string> common = {"prompt_tokens",   "output_tokens", "duration_s",
                                           "max_requests",    "bursts",        "priority",
                                           "max_queue_time_s"};
  auto with = [&](std::string key) {
    std::vector<std::string> keys{std::move(key)};
    keys.insert(keys.end(), common.begin(), common.end());
    return keys;
  };
  r.add({"arrivals", "open loop: arrivals that do not wait for the server", with("arrivals"),
         make_open_loop});
  r.add({"clients", "closed loop: clients that send again after each reply", with("clients"),
         make_closed_loop});
  r.add({"trace", "a replayed trace file (docs/workloads.md's formats)", {"trace"}, make_trace});
}

const WorkloadKindRegistry& workload_kind_registry() {
  static const WorkloadKindRegistry registry =
      WorkloadKindRegistry::filled("workload kind", register_workload_kinds);
  return registry;
}

Workload make_workload(const ConfigNode& n, uint64_t seed) {
  const WorkloadKindRegistry& registry = workload_kind_registry();
  if (!n.is_map()) n.fail_expected("a workload map with " + or_list(registry.names(), ":"));
  n.allow(registry.names());
  const WorkloadKindRegistry::Entry* kind = nullptr;
  int kinds = 0;
  for (const auto& e : registry.entries()) {
    if (!n.has(e.name)) continue;
    kind = &e;
    ++kinds;
  }
  if (kinds != 1) n.fail("give exactly one of " + or_list(registry.names(), ":"));
  n.allow(kind->keys);
  Workload w = kind->make(n, seed);
  n.reject_unknown_keys();
  return w;
}

}  // namespace kvsim
