// Very long runs: bounded-memory latency percentiles, the wall-clock stop hook
// of the event queue and its partial results, and the progress line's text.
#include <catch2/catch.hpp>

#include <cmath>

#include "sim/engine/event_queue.h"
#include "sim/metrics/recorder.h"
#include "sim/metrics/summary_writer.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;

TEST_CASE("LatencySamples: exact up to the limit, byte-identical to latency_stats", "[metrics]") {
  // 1, 2, ..., 100 s with a limit of 100: still exact. NumPy: p50 at position 49.5 -> 50.5,
  // p90 at 89.1 -> 90.1, p99 at 98.01 -> 99.01, mean 5050 / 100 = 50.5.
  LatencySamples s(100);
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) {
    s.add(i);
    v.push_back(i);
  }
  CHECK_FALSE(s.sketched());
  const LatencyStats a = s.stats(), b = latency_stats(v);
  CHECK(a.p50 == b.p50);
  CHECK(a.p90 == b.p90);
  CHECK(a.p99 == b.p99);
  CHECK(a.mean == b.mean);
  CHECK(a.p50 == 50.5);
  CHECK(a.p99 == Approx(99.01).epsilon(1e-12));
}

TEST_CASE("LatencySamples: past the limit, a sketch within 0.5% of the exact percentiles",
          "[metrics]") {
  // The same 1..100 s with a limit of 10: the 11th sample moves all into geometric buckets
  // (ratio 1.01; each read at its geometric middle, within sqrt(1.01) - 1 = 0.499% of any value
  // in it). Exact: p50 50.5, p90 90.1, p99 99.01; the sketch interpolates bucket middles the same
  // way, so each is within 0.5% of those. The mean is a running sum: exactly 50.5.
  LatencySamples s(10);
  for (int i = 1; i <= 100; ++i) s.add(i);
  CHECK(s.sketched());
  const LatencyStats a = s.stats();
  CHECK(a.count == 100);
  CHECK(std::abs(a.p50 / 50.5 - 1) <= LatencySamples::kSketchRelError);
  CHECK(std::abs(a.p90 / 90.1 - 1) <= LatencySamples::kSketchRelError);
  CHECK(std::abs(a.p99 / 99.01 - 1) <= LatencySamples::kSketchRelError);
  CHECK(a.p50 != 50.5);  // really the sketch: 50 and 51 s read at their buckets' middles
  CHECK(a.mean == Approx(50.5).epsilon(1e-12));
  // Millisecond latencies (whole ns once rounded) too: 1..1000 ms, p99 exact at 990.01 ms.
  LatencySamples ms(1);
  for (int i = 1; i <= 1000; ++i) ms.add(i * 1e-3);
  CHECK(std::abs(ms.stats().p99 / 0.99001 - 1) <= LatencySamples::kSketchRelError);
}

TEST_CASE("EventQueue poll: runs every kPollEvents events; true stops run() cleanly", "[engine]") {
  // 10,000 events 1 ns apart; the poll says stop from its first call, which comes after event
  // 4,096: 4,096 events run, 5,904 stay pending, the clock at the 4,096th (t = 4,095 ns).
  EventQueue q;
  int polls = 0;
  q.set_poll([&] { return ++polls >= 1; });
  for (int i = 0; i < 10'000; ++i) q.schedule_at(i, [] {});
  q.run();
  CHECK(q.stopped());
  CHECK(polls == 1);
  CHECK(q.events_processed() == 4096);
  CHECK(q.now() == 4095);
  CHECK_FALSE(q.empty());
  // A poll that never says stop: every event runs, polled at 4,096 and 8,192.
  EventQueue r;
  int r_polls = 0;
  r.set_poll([&] { return ++r_polls < 0; });
  for (int i = 0; i < 10'000; ++i) r.schedule_at(i, [] {});
  r.run();
  CHECK_FALSE(r.stopped());
  CHECK(r_polls == 2);
  CHECK(r.events_processed() == 10'000);
}

TEST_CASE("progress_line: simulated time, requests done, rate, ETA when the total is known",
          "[engine]") {
  // 3,000 done in 2 s of wall: 1,500/s; 9,000 in all leaves 6,000 / 1,500 = 4 s.
  CHECK(progress_line("paged", 120.0, 3000, 9000, 2.0) ==
        "kvsim: policy paged  t=120.0 s simulated  3,000 requests done (1,500/s)  ETA 4 s");
  CHECK(progress_line("paged", 0.04, 0, std::nullopt, 1.0) ==
        "kvsim: policy paged  t=0.0 s simulated  0 requests done (0/s)");
}

TEST_CASE("max_wall_s: a run stopped at once keeps what finished, in-flight counted", "[engine]") {
  // 5,000 requests of 64 prompt / 64 output tokens at 100/s: an event each, more than 4,096.
  // A wall limit of 1 ns has passed at the first poll (after event 4,096): the run stops there,
  // every policy partial, outcomes + in_flight_at_stop = requests that arrived (none lost).
  const std::string yaml = R"(
name: long
seed: 1
model: seed-7b-mha
gpu: a100-sxm4-80gb
workload:
  arrivals: {type: poisson, rate: 100}
  max_requests: 5000
  prompt_tokens: 64
  output_tokens: 64
policies:
  - {name: paged, guards: []}
)";
  const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
  RunOptions o;
  o.max_wall_s = 1e-9;
  const RunResult r = run_scenario(s, o);
  const PolicySummary& p = r.policies.front();
  REQUIRE(p.in_flight_at_stop.has_value());
  int64_t outcomes = 0;
  for (int64_t n : p.outcomes) outcomes += n;
  CHECK(outcomes + *p.in_flight_at_stop == p.requests_total);
  CHECK(p.requests_total <= 4096);  // arrivals stopped too (each an event)
  // Without the limit: the same scenario runs to its end, not partial.
  const Scenario s2 =
      load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
  const RunResult full = run_scenario(s2, RunOptions{});
  CHECK_FALSE(full.policies.front().in_flight_at_stop.has_value());
  CHECK(full.policies.front().requests_total == 5000);
}

TEST_CASE("summary.json: sketch and partial keys only when they apply", "[metrics]") {
  // An exact, complete policy: neither key, so every existing summary.json keeps its bytes.
  PolicySummary exact;
  exact.name = "a";
  const auto a = summary_json({exact})["policies"][0];
  CHECK_FALSE(a.contains("latency_percentiles"));
  CHECK_FALSE(a.contains("sketch_rel_error"));
  CHECK_FALSE(a.contains("partial"));
  CHECK_FALSE(a.contains("in_flight_at_stop"));
  PolicySummary cut = exact;
  cut.latency_sketched = true;
  cut.in_flight_at_stop = 3;
  const auto b = summary_json({cut})["policies"][0];
  CHECK(b["latency_percentiles"] == "sketch");
  CHECK(b["sketch_rel_error"] == 0.005);
  CHECK(b["partial"] == "max_wall_s");
  CHECK(b["in_flight_at_stop"] == 3);
}
