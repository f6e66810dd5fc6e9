// `--timeline` writes the Chrome trace-event format (docs/timeline.md). Each
// file is checked against the format's documented schema (the JSON object form: traceEvents with
// name, ph, ts in microseconds, dur for 'X', pid, tid, args), and its content against runs small
// enough to count by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "sim/timeline/timeline_writer.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using json = nlohmann::json;

namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& stem) {
  static int n = 0;
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("kvsim-timeline-{}-{}", ::getpid(), n++);
  fs::create_directories(dir);
  return (dir / stem).string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Traced {
  RunResult run;
  json trace;
};

Traced run_traced(const std::string& yaml, double start_s = 0,
                  double end_s = std::numeric_limits<double>::infinity()) {
  const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
  RunOptions o;
  o.check_invariants = true;
  o.timeline_path = temp_path("timeline.json");
  o.timeline_start_s = start_s;
  o.timeline_end_s = end_s;
  Traced t{run_scenario(s, o), {}};
  t.trace = json::parse(read_file(o.timeline_path));
  return t;
}

// The trace-event format's rules for the phases kvsim writes (Google's "Trace Event Format"
// document): every event has name, ph, pid, tid; all but metadata a ts in microseconds; 'X' a
// dur; 'i' a scope s; 'C' numeric args; 'M' process_name/thread_name/process_sort_index.
void check_schema(const json& trace) {
  REQUIRE(trace.is_object());
  REQUIRE(trace.contains("traceEvents"));
  REQUIRE(trace["traceEvents"].is_array());
  CHECK(trace.value("displayTimeUnit", "") == "ms");
  for (const json& e : trace["traceEvents"]) {
    INFO(e.dump());
    REQUIRE(e.is_object());
    REQUIRE(e["name"].is_string());
    REQUIRE(e["pid"].is_number_integer());
    REQUIRE(e["tid"].is_number_integer());
    REQUIRE(e["args"].is_object());
    const std::string ph = e["ph"].get<std::string>();
    REQUIRE(std::set<std::string>{"X", "C", "i", "M"}.count(ph) == 1);
    if (ph == "M") {
      CHECK(std::set<std::string>{"process_name", "process_sort_index", "thread_name"}.count(
                e["name"].get<std::string>()) == 1);
      continue;
    }
    REQUIRE(e["ts"].is_number());
    CHECK(e["ts"].get<double>() >= 0);
    if (ph == "X") {
      REQUIRE(e["dur"].is_number());
      CHECK(e["dur"].get<double>() > 0);
      for (const char* k : {"prefill_tokens", "prefill_seqs", "decode_tokens", "batch_size"}) {
        CHECK(e["args"][k].is_number_integer());
      }
      // dur (µs) and duration_ms say the same time.
      CHECK(e["dur"].get<double>() == Approx(e["args"]["duration_ms"].get<double>() * 1e3));
    }
    if (ph == "i") CHECK(e["s"] == "t");
    if (ph == "C") {
      for (const auto& [k, v] : e["args"].items()) CHECK(v.is_number());
    }
  }
  // Within each track (pid, tid), events are written in time order.
  std::map<std::pair<int, int>, double> last;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M") continue;
    const std::pair<int, int> track{e["pid"].get<int>(), e["tid"].get<int>()};
    const double ts = e["ts"].get<double>();
    if (auto it = last.find(track); it != last.end()) {
      INFO(e.dump() << " after an event at " << it->second);
      CHECK(ts >= it->second);
    }
    last[track] = ts;
  }
}

std::vector<json> events(const json& trace, const std::string& ph, const std::string& name = "") {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == ph && (name.empty() || e["name"] == name)) out.push_back(e);
  }
  return out;
}

// One request of 16 prompt and 4 output tokens, paged KV, no guard.
// Synchronous scheduling: the counters after the last iteration show the request finished (under
// async scheduling it holds its blocks until the next plan is made).
const char* kOneRequest = R"(name: one
model: seed-7b-mha
gpu: a100-sxm4-80gb
engine: {kv: {type: paged}, async_scheduling: false}
workload:
  arrivals: {type: fixed, rate: 1}
  max_requests: 1
  prompt_tokens: 16
  output_tokens: 4
policies: [{name: p, guards: []}]
)";

// Two 16k-token requests on a GPU that holds one (engine_test_util.h's kSmallGpu): the second's
// preallocation fails and the server crashes (restart_s 10), or the reserve guard rejects it.
std::string two_requests(const std::string& policies) {
  return fmt::format(R"(name: two
model: seed-7b-mha
gpu: {}
engine: {{kv: {{type: caching_allocator, growth: preallocate}}, on_oom: crash, restart_s: 10, max_model_len: 16400}}
workload:
  arrivals: {{type: fixed, rate: 100}}
  max_requests: 2
  prompt_tokens: 16384
  output_tokens: 16
policies: {}
)",
                     test::kSmallGpu, policies);
}

}  // namespace

TEST_CASE("timeline: one slice per iteration with its tokens, named tracks", "[engine][timeline]") {
  const Traced t = run_traced(kOneRequest);
  check_schema(t.trace);
  // The request's prefill emits its first token; three decode steps make the other three: four
  // iterations, the first a 16-token prefill, then three one-token decodes of a batch of one.
  REQUIRE(t.run.policies.at(0).iterations == 4);
  const auto slices = events(t.trace, "X");
  REQUIRE(slices.size() == 4);
  CHECK(slices[0]["name"] == "prefill");
  CHECK(slices[0]["args"]["prefill_tokens"] == 16);
  CHECK(slices[0]["args"]["decode_tokens"] == 0);
  CHECK(slices[0]["args"]["batch_size"] == 1);
  for (size_t i = 1; i < 4; ++i) {
    CHECK(slices[i]["name"] == "decode");
    CHECK(slices[i]["args"]["prefill_tokens"] == 0);
    CHECK(slices[i]["args"]["decode_tokens"] == 1);
    CHECK(slices[i]["args"]["batch_size"] == 1);
    // Back to back: each iteration starts when the one before ends.
    CHECK(slices[i]["ts"].get<double>() ==
          Approx(slices[i - 1]["ts"].get<double>() + slices[i - 1]["dur"].get<double>()));
  }
  // The first request of a fixed 1/s stream arrives at 1 s = 1,000,000 µs and runs at once.
  CHECK(slices[0]["ts"].get<double>() == Approx(1e6));
  // The track: process "p" (pid 1), thread "replica 0".
  const auto meta = events(t.trace, "M", "process_name");
  REQUIRE(meta.size() == 1);
  CHECK(meta[0]["args"]["name"] == "p");
  CHECK(meta[0]["pid"] == 1);
  // Counters after each iteration: three series per iteration; after the last, nothing runs.
  CHECK(events(t.trace, "C").size() == 3 * 4);
  const auto queues = events(t.trace, "C", "queues");
  CHECK(queues.back()["args"]["running"] == 0);
  CHECK(queues.front()["args"]["running"] == 1);
  CHECK(events(t.trace, "C", "KV cache bytes").back()["args"]["used"] == 0);
}

TEST_CASE("timeline: --timeline-window keeps the iterations that start inside it",
          "[engine][timeline]") {
  const Traced full = run_traced(kOneRequest);
  const auto all = events(full.trace, "X");
  REQUIRE(all.size() == 4);
  // The window from the start to the third iteration's start (exclusive) holds the first two;
  // from the second's start to the end, the last three.
  const double third_s = all[2]["ts"].get<double>() / 1e6;
  const double second_s = all[1]["ts"].get<double>() / 1e6;
  const Traced head = run_traced(kOneRequest, 0, third_s);
  check_schema(head.trace);
  CHECK(events(head.trace, "X").size() == 2);
  const Traced tail = run_traced(kOneRequest, second_s);
  CHECK(events(tail.trace, "X").size() == 3);
  // A window after the run: the tracks' names only.
  const Traced none = run_traced(kOneRequest, 1000);
  check_schema(none.trace);
  CHECK(events(none.trace, "X").empty());
  CHECK(events(none.trace, "C").empty());
  CHECK(events(none.trace, "M").size() == 3);
}

TEST_CASE("timeline: an OOM crash, the restart and a rejection are instant events",
          "[engine][timeline]") {
  const Traced t = run_traced(two_requests(
      "[{name: none, guards: []}, {name: reject, guards: [{type: reserve, on_fail: reject}]}]"));
  check_schema(t.trace);
  // Policy none (pid 1): request 1 arrives at 0.02 s while request 0 runs; its preallocation
  // does not fit: one crash, blamed on request 1, and the restart 10 s later.
  std::vector<json> crash, restart, rejected;
  for (const json& e : events(t.trace, "i")) {
    if (e["name"] == "OOM crash") crash.push_back(e);
    if (e["name"] == "restarted") restart.push_back(e);
    if (e["name"] == "rejected") rejected.push_back(e);
  }
  REQUIRE(crash.size() == 1);
  CHECK(crash[0]["pid"] == 1);
  CHECK(crash[0]["args"]["request"] == 1);
  REQUIRE(restart.size() == 1);
  CHECK(restart[0]["ts"].get<double>() == Approx(crash[0]["ts"].get<double>() + 10e6));
  // After the crash nothing is held or queued: the last counters at its instant (the iteration
  // that ended then wrote its own first) show empty queues and no KV.
  json after_crash, kv_after_crash;
  for (const json& c : events(t.trace, "C", "queues")) {
    if (c["pid"] == 1 && c["ts"] == crash[0]["ts"]) after_crash = c;
  }
  for (const json& c : events(t.trace, "C", "KV cache bytes")) {
    if (c["pid"] == 1 && c["ts"] == crash[0]["ts"]) kv_after_crash = c;
  }
  REQUIRE(after_crash.is_object());
  CHECK(after_crash["args"]["running"] == 0);
  CHECK(after_crash["args"]["waiting"] == 0);
  CHECK(after_crash["args"]["guard_queue"] == 0);
  CHECK(kv_after_crash["args"]["used"] == 0);
  // Policy reject (pid 2): the reserve guard refuses request 1 on arrival (0.02 s = 20,000 µs).
  REQUIRE(rejected.size() == 1);
  CHECK(rejected[0]["pid"] == 2);
  CHECK(rejected[0]["args"]["request"] == 1);
  CHECK(rejected[0]["ts"].get<double>() == Approx(20'000));
  CHECK(t.run.policies.at(0).oom_events == 1);
  CHECK(t.run.policies.at(1).oom_events == 0);
}

TEST_CASE("timeline: a preemption is an instant event", "[engine][timeline]") {
  // Paged KV small enough that two growing requests run out of blocks: the newest is preempted
  // (recompute), once per preemption the summary counts.
  const Traced t = run_traced(R"(name: pre
model: seed-7b-mha
gpu: {name: small, memory_gb: 22, hbm_gb_per_s: 2000, fp16_tflops: 312}
engine: {kv: {type: paged, block_size: 16}, max_model_len: 2200}
workload:
  arrivals: {type: fixed, rate: 1000}
  max_requests: 4
  prompt_tokens: 1024
  output_tokens: 1024
policies: [{name: p, guards: []}]
)");
  check_schema(t.trace);
  const int64_t preemptions = t.run.policies.at(0).preemptions;
  CHECK(preemptions > 0);
  CHECK(static_cast<int64_t>(events(t.trace, "i", "preempted").size()) == preemptions);
}

TEST_CASE("timeline: --timeline-window's text", "[engine][timeline]") {
  CHECK(parse_timeline_window("5:10").start_s == 5);
  CHECK(parse_timeline_window("5:10").end_s == 10);
  CHECK(parse_timeline_window(":10").start_s == 0);
  CHECK(std::isinf(parse_timeline_window("5:").end_s));
  CHECK_THROWS_AS(parse_timeline_window("10:5"), InputError);
  CHECK_THROWS_AS(parse_timeline_window("5"), InputError);
  CHECK_THROWS_WITH(parse_timeline_window("a:b"),
                    "--timeline-window 'a:b': expected START:END in seconds (>= 0)");
}

TEST_CASE("a cluster's replicas get a timeline track each, named by their label", "[timeline]") {
  // Two identical replicas behind round robin; two requests of 16 prompt + 4 output tokens, 1 s
  // apart: request 0 goes to a-0, request 1 to a-1. Each replica then runs what kOneRequest's
  // replica runs: one 16-token prefill and three one-token decodes, 4 slices, on its own track
  // (pid 1; tid 1 for a-0, tid 2 for a-1), and the two tracks are named a-0 and a-1.
  const Traced t = run_traced(R"(name: two-replicas
model: seed-7b-mha
gpu: a100-sxm4-80gb
engine: {kv: {type: paged}}
cluster: {replicas: [{name: a, count: 2}], router: {type: round_robin}}
workload:
  arrivals: {type: fixed, rate: 1}
  max_requests: 2
  prompt_tokens: 16
  output_tokens: 4
policies: [{name: p, guards: []}]
)");
  check_schema(t.trace);
  std::map<int, int> slices;
  for (const json& e : events(t.trace, "X")) ++slices[e["tid"].get<int>()];
  CHECK(slices == std::map<int, int>{{1, 4}, {2, 4}});
  std::map<int, std::string> names;
  for (const json& e : events(t.trace, "M", "thread_name")) {
    names[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
  }
  CHECK(names == std::map<int, std::string>{{1, "a-0"}, {2, "a-1"}});
}

TEST_CASE("timeline: a queue deadline that passes during an iteration is written after its slice",
          "[engine][timeline]") {
  // One sequence at a time (max_num_seqs 1), a request every 1 ms from 1 ms: request 0 (512 + 64
  // tokens) runs from 0.001 s; request 1 arrives at 0.002 s with a 0.05 s deadline and waits, so
  // it times out at 0.052 s, while one of request 0's iterations runs (each a few ms: one starts
  // before 0.052 s and ends after). That iteration is reported when it ends, after the timeout:
  // the track must still list the slice (which starts before 0.052 s) before the timed_out
  // instant.
  const Traced t = run_traced(R"(name: deadline
model: seed-7b-mha
gpu: a100-sxm4-80gb
engine: {kv: {type: paged}, max_num_seqs: 1}
workload:
  arrivals: {type: fixed, rate: 1000}
  max_requests: 2
  prompt_tokens: 512
  output_tokens: 64
  max_queue_time_s: 0.05
policies: [{name: p, guards: []}]
)");
  check_schema(t.trace);  // every track in time order
  const auto timed_out = events(t.trace, "i", "timed_out");
  REQUIRE(timed_out.size() == 1);
  const double at = timed_out[0]["ts"].get<double>();
  CHECK(at == Approx(2'000 + 50'000));  // arrival 2 ms + 50 ms, in µs
  // The slice in flight at the deadline: it starts before it, ends after it, and comes first.
  size_t slice_pos = 0, instant_pos = 0, i = 0;
  bool straddles = false;
  for (const json& e : t.trace["traceEvents"]) {
    if (e["ph"] == "X" && e["ts"].get<double>() < at &&
        e["ts"].get<double>() + e["dur"].get<double>() > at) {
      straddles = true;
      slice_pos = i;
    }
    if (e["ph"] == "i" && e["name"] == "timed_out") instant_pos = i;
    ++i;
  }
  REQUIRE(straddles);
  CHECK(slice_pos < instant_pos);
}
