// The contracts of the workload generators' registries, run over every entry: a length
// distribution or arrival process registered in register_length_dists() /
// register_arrival_processes() gets this suite without anyone editing it.
// How it fails: an entry whose example does not parse, reads keys it does not declare (an
// unknown-key error), samples a length < 1 or above its max_value(), draws decreasing arrival
// times, or gives other numbers for the same seed, fails the CHECK that says which.
#include <catch2/catch.hpp>

#include "core/config_node.h"
#include "workloads/generators/open_loop.h"
#include "workloads/lengths.h"

using namespace kvsim;

TEST_CASE("every registered length distribution parses its example and samples in range",
          "[contract][workload]") {
  const auto& entries = length_dist_registry().entries();
  REQUIRE(entries.size() >= 4);
  for (const auto& entry : entries) {
    INFO("length distribution " << entry.name << ": " << entry.make.example);
    const ConfigNode node = ConfigNode::parse_string(entry.make.example, "example");
    const LengthDist d = LengthDist::parse(node);
    node.reject_unknown_keys();
    Rng a(7), b(7);
    for (int i = 0; i < 1000; ++i) {
      const int64_t v = d.sample(a);
      CHECK(v >= 1);
      CHECK(v <= d.max_value());
      CHECK(v == d.sample(b));  // deterministic for a seed
    }
    // A typo among its keys is reported with a did-you-mean from the entry's keys.
    for (const auto& key : entry.keys) {
      YAML::Node y = YAML::Load(entry.make.example);
      y[key + "x"] = 1;
      const ConfigNode typo = ConfigNode::wrap(y, "typo");
      LengthDist::parse(typo);
      CHECK_THROWS_WITH(typo.reject_unknown_keys(),
                        Catch::Matchers::Contains("did you mean '" + key + "'"));
    }
  }
}

TEST_CASE("every registered arrival process parses its example and draws ordered arrivals",
          "[contract][workload]") {
  const auto& entries = arrival_process_registry().entries();
  REQUIRE(entries.size() >= 3);
  for (const auto& entry : entries) {
    INFO("arrival process " << entry.name << ": " << entry.make.example);
    const ConfigNode node = ConfigNode::parse_string(entry.make.example, "example");
    OpenLoopParams p;
    p.arrivals = ArrivalProcess::parse(node);
    node.reject_unknown_keys();
    p.max_requests = 200;
    OpenLoopSource first(p, 11), second(p, 11);
    SimTime prev = 0;
    int n = 0;
    while (auto r = first.next()) {
      const auto again = second.next();
      REQUIRE(again);
      CHECK(r->arrival == again->arrival);  // deterministic for a seed
      CHECK(r->arrival >= prev);
      prev = r->arrival;
      ++n;
    }
    CHECK(n == 200);
    CHECK(prev > 0);
  }
}
