// Trace options: window, time scale, request limit, length caps, on_bad_row: skip, and the YAML
// `trace:` node (relative paths, errors with positions).
#include <catch2/catch.hpp>
#include <filesystem>

#include "core/config_node.h"
#include "core/errors.h"
#include "tests/workloads/test_util.h"
#include "workloads/traces/trace_reader.h"

using namespace kvsim;
using Catch::Matchers::Contains;
using kvsim::test::data_path;
using kvsim::test::drain;

namespace {
const std::string kNorm = data_path("traces/azure-conv-2023.head2000.csv");
const std::string kMoon = data_path("traces/mooncake-conversation.head2000.orig.jsonl");

std::vector<RequestSpec> read(TraceOptions o) {
  auto s = open_trace(o);
  return drain(*s);
}
TraceOptions opts(const std::string& path) {
  TraceOptions o;
  o.path = path;
  return o;
}
}  // namespace

TEST_CASE(
    "a window keeps trace times in start (inclusive) to end (exclusive), replayed from its start",
    "[trace][options]") {
  auto all = read(opts(kNorm));
  TraceOptions o = opts(kNorm);
  o.window_start_s = 100;
  o.window_end_s = 200;
  auto w = read(o);
  std::vector<RequestSpec> expect;
  for (const auto& r : all) {
    if (r.arrival >= 100 * kNsPerSecond && r.arrival < 200 * kNsPerSecond) expect.push_back(r);
  }
  REQUIRE(!expect.empty());
  REQUIRE(w.size() == expect.size());
  for (size_t i = 0; i < w.size(); ++i) {
    CHECK(w[i].id == static_cast<int64_t>(i));
    CHECK(w[i].arrival == expect[i].arrival - 100 * kNsPerSecond);
    CHECK(w[i].prompt_tokens == expect[i].prompt_tokens);
  }
  int64_t before = 0;
  for (const auto& r : all) before += r.arrival < 100 * kNsPerSecond;
  CHECK(o.counters->outside_window == before);
}

TEST_CASE("time_scale replays k times faster", "[trace][options]") {
  auto all = read(opts(kNorm));
  TraceOptions o = opts(kNorm);
  o.time_scale = 4.0;
  auto fast = read(o);
  REQUIRE(fast.size() == all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    REQUIRE(fast[i].arrival == std::llround(static_cast<double>(all[i].arrival) / 4.0));
  }
}

TEST_CASE("max_requests stops early and length caps clip (and are counted)", "[trace][options]") {
  TraceOptions o = opts(kMoon);
  o.max_requests = 7;
  CHECK(read(o).size() == 7);
  CHECK(o.counters->requests == 7);

  auto all = read(opts(kMoon));
  TraceOptions c = opts(kMoon);
  c.max_prompt_tokens = 1000;
  c.max_output_tokens = 100;
  auto clipped = read(c);
  REQUIRE(clipped.size() == all.size());
  int64_t over_prompt = 0, over_output = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    over_prompt += all[i].prompt_tokens > 1000;
    over_output += all[i].output_tokens > 100;
    REQUIRE(clipped[i].prompt_tokens == std::min<int64_t>(all[i].prompt_tokens, 1000));
    REQUIRE(clipped[i].output_tokens == std::min<int64_t>(all[i].output_tokens, 100));
    // The prefix hashes shrink with the prompt: ceil(1000 / 512) = 2 blocks at most.
    REQUIRE(clipped[i].prefix_hashes.size() == std::min<size_t>(all[i].prefix_hashes.size(), 2));
  }
  CHECK(c.counters->clipped_prompt == over_prompt);
  CHECK(c.counters->clipped_output == over_output);
  CHECK(over_prompt == 1804);  // of 2,000 rows: Mooncake prompts are long
}

TEST_CASE("on_bad_row: skip drops malformed and backwards rows and counts them",
          "[trace][options]") {
  auto p = kvsim::test::temp_file("skip.csv",
                                  "arrival_s,prompt_tokens,output_tokens\n"
                                  "0.0,10,1\n"
                                  "0.5,abc,1\n"  // bad integer
                                  "1.0,10,0\n"   // zero output
                                  "2.0,10,1\n"
                                  "1.5,10,1\n"    // goes backwards
                                  "3.0,10,1,9\n"  // extra field
                                  "4.0,10,1\n");
  TraceOptions o = opts(p);
  CHECK_THROWS_WITH(read(o), p + ":3: prompt_tokens: expected an integer >= 1, got 'abc'");
  o.on_bad_row = BadRowPolicy::kSkip;
  auto v = read(o);
  REQUIRE(v.size() == 3);
  CHECK(v[2].arrival == 4 * kNsPerSecond);
  CHECK(v[2].id == 2);
  CHECK(o.counters->skipped_bad_rows == 4);
  CHECK(o.counters->rows_read == 7);
  CHECK(o.counters->first_skipped == p + ":3: prompt_tokens: expected an integer >= 1, got 'abc'");
}

TEST_CASE("trace: node from YAML, relative to the scenario's folder", "[trace][options]") {
  const std::string scenario = std::string(KVSIM_TEST_DATA) + "/traces/scenario.yaml";
  auto root = ConfigNode::parse_string(
      "trace: {path: azure-conv-2023.head2000.csv, window_s: [10, 60], time_scale: 2,\n"
      "        max_requests: 5, max_prompt_tokens: 4096, max_output_tokens: 512,\n"
      "        on_bad_row: skip}\n",
      scenario);
  TraceOptions o = parse_trace_options(root.child("trace"));
  root.reject_unknown_keys();
  CHECK(o.path == kNorm);
  CHECK(o.format == "auto");
  CHECK(o.window_start_s == 10);
  CHECK(o.window_end_s == 60);
  CHECK(o.time_scale == 2);
  CHECK(o.max_requests == 5);
  CHECK(o.max_prompt_tokens == 4096);
  CHECK(o.max_output_tokens == 512);
  CHECK(o.on_bad_row == BadRowPolicy::kSkip);
  CHECK(read(o).size() == 5);

  auto bad = ConfigNode::parse_string("trace: {path: x.csv, on_bad_row: ignore}\n", "s.yaml");
  CHECK_THROWS_WITH(parse_trace_options(bad.child("trace")), Contains("s.yaml:1:"));
  CHECK_THROWS_WITH(parse_trace_options(bad.child("trace")), Contains("on_bad_row"));
  auto win = ConfigNode::parse_string("trace: {path: x.csv, window_s: [50, 10]}\n", "w.yaml");
  CHECK_THROWS_WITH(parse_trace_options(win.child("trace")), Contains("w.yaml:1:"));
  auto scale = ConfigNode::parse_string("trace: {path: x.csv, time_scale: 0}\n", "t.yaml");
  CHECK_THROWS_WITH(parse_trace_options(scale.child("trace")), Contains("time_scale"));
  // A missing trace is found while loading, so the error points at the scenario's path: value.
  auto missing = ConfigNode::parse_string("trace:\n  path: no-such.csv\n", "m.yaml");
  CHECK_THROWS_WITH(parse_trace_options(missing.child("trace")),
                    Contains("m.yaml:2:9: trace.path: trace file not found: no-such.csv"));
  const std::string folder = std::string(KVSIM_TEST_DATA) + "/traces";
  auto dir = ConfigNode::parse_string("trace: {path: '" + folder + "'}\n", "d.yaml");
  CHECK_THROWS_WITH(parse_trace_options(dir.child("trace")),
                    Contains("d.yaml:1:15: trace.path: trace path is not a regular file"));
}
