// Synthetic workloads: determinism (same seed, same stream), statistics of the samplers and of
// the arrival processes, mixtures, bursts, closed-loop think time and limits, config errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "core/config_node.h"
#include "core/errors.h"
#include "tests/workloads/test_util.h"
#include "workloads/lengths.h"
#include "workloads/random.h"
#include "workloads/workload.h"

using namespace kvsim;
using Catch::Matchers::Contains;
using kvsim::test::drain;

namespace {

Workload build(const std::string& yaml, uint64_t seed = 42) {
  auto root = ConfigNode::parse_string(yaml, "w.yaml");
  return make_workload(root.child("workload"), seed);
}

std::vector<RequestSpec> open_loop(const std::string& yaml, uint64_t seed = 42) {
  Workload w = build(yaml, seed);
  REQUIRE(w.kind == Workload::Kind::kOpenLoop);
  return drain(*w.source);
}

bool same(const std::vector<RequestSpec>& a, const std::vector<RequestSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id || a[i].arrival != b[i].arrival ||
        a[i].prompt_tokens != b[i].prompt_tokens || a[i].output_tokens != b[i].output_tokens) {
      return false;
    }
  }
  return true;
}

const char* kPoisson =
    "workload:\n"
    "  arrivals: {type: poisson, rate: 20}\n"
    "  prompt_tokens: {type: lognormal, median: 1000, sigma: 1.0, min: 1, max: 32768}\n"
    "  output_tokens: {type: uniform, min: 10, max: 500}\n"
    "  max_requests: 50000\n";

}  // namespace

TEST_CASE("the raw stream is std::mt19937_64's, fixed by the standard", "[workload][rng]") {
  // The standard fixes the 10000th output of a default-seeded mt19937_64.
  std::mt19937_64 e;
  e.discard(9999);
  CHECK(e() == 9981545732273789042ULL);
  // Our samplers on a fixed seed: pinned values, so a change in any sampler shows up here.
  Rng r(7);
  CHECK(r.uniform01() == 0.75438530415285798);
  CHECK(r.normal() == 0.4359415981044002);
  CHECK(r.gamma(0.25) == 0.0024427049263158734);
  Rng a(123), b(123);
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(a.normal() == b.normal());
    REQUIRE(a.gamma(0.25) == b.gamma(0.25));
  }
}

TEST_CASE("samplers have the right moments", "[workload][rng]") {
  Rng r(derive_seed(42, 9));
  constexpr int kN = 200000;
  double s = 0, s2 = 0, e = 0, g = 0, g2 = 0, gs = 0, gs2 = 0;
  for (int i = 0; i < kN; ++i) {
    const double z = r.normal();
    s += z;
    s2 += z * z;
    e += r.exponential(2.5);
    const double x = r.gamma(4.0);
    g += x;
    g2 += x * x;
    const double y = r.gamma(0.25);
    gs += y;
    gs2 += y * y;
  }
  CHECK(s / kN == Approx(0.0).margin(0.01));
  CHECK(s2 / kN == Approx(1.0).epsilon(0.01));
  CHECK(e / kN == Approx(2.5).epsilon(0.01));
  CHECK(g / kN == Approx(4.0).epsilon(0.01));                         // mean = shape
  CHECK(g2 / kN - (g / kN) * (g / kN) == Approx(4.0).epsilon(0.03));  // var = shape
  CHECK(gs / kN == Approx(0.25).epsilon(0.02));
  CHECK(gs2 / kN - (gs / kN) * (gs / kN) == Approx(0.25).epsilon(0.05));
  for (int i = 0; i < 10000; ++i) {
    const int64_t k = r.uniform_int(3, 7);
    REQUIRE(k >= 3);
    REQUIRE(k <= 7);
  }
}

TEST_CASE("same seed gives the same stream, another seed another stream", "[workload]") {
  auto a = open_loop(kPoisson, 42);
  auto b = open_loop(kPoisson, 42);
  auto c = open_loop(kPoisson, 43);
  REQUIRE(a.size() == 50000);
  CHECK(same(a, b));
  CHECK(!same(a, c));
  // Pinned first request: a change to any sampler or stream layout shows up here.
  CHECK(a[0].arrival == 49'355'395);
  CHECK(a[0].prompt_tokens == 6779);
  CHECK(a[0].output_tokens == 470);
  CHECK(a[2].arrival == 182'615'476);
  CHECK(a[2].prompt_tokens == 1393);
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].id == static_cast<int64_t>(i));
    if (i > 0) REQUIRE(a[i].arrival >= a[i - 1].arrival);
    REQUIRE(a[i].prompt_tokens >= 1);
    REQUIRE(a[i].prompt_tokens <= 32768);
    REQUIRE(a[i].output_tokens >= 10);
    REQUIRE(a[i].output_tokens <= 500);
  }
}

TEST_CASE("lengths do not depend on the arrival rate (separate streams)", "[workload]") {
  std::string fast = kPoisson;
  fast.replace(fast.find("rate: 20"), 8, "rate: 90");
  auto a = open_loop(kPoisson), b = open_loop(fast);
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].prompt_tokens == b[i].prompt_tokens);
    REQUIRE(a[i].output_tokens == b[i].output_tokens);
  }
  CHECK(a.back().arrival > b.back().arrival);
}

TEST_CASE("Poisson, gamma and fixed arrivals have the configured mean rate", "[workload]") {
  auto rate_of = [](const std::vector<RequestSpec>& v) {
    return static_cast<double>(v.size()) / sim_to_seconds(v.back().arrival);
  };
  auto cv_of = [](const std::vector<RequestSpec>& v) {
    double s = 0, s2 = 0;
    for (size_t i = 1; i < v.size(); ++i) {
      const double g = sim_to_seconds(v[i].arrival - v[i - 1].arrival);
      s += g;
      s2 += g * g;
    }
    const double n = static_cast<double>(v.size() - 1), m = s / n;
    return std::sqrt(s2 / n - m * m) / m;
  };
  auto p = open_loop(kPoisson);
  CHECK(rate_of(p) == Approx(20.0).epsilon(0.02));
  CHECK(cv_of(p) == Approx(1.0).epsilon(0.03));
  auto g = open_loop(
      "workload: {arrivals: {type: gamma, rate: 5, cv: 3}, prompt_tokens: 100, "
      "output_tokens: 10, max_requests: 100000}\n");
  CHECK(rate_of(g) == Approx(5.0).epsilon(0.05));
  CHECK(cv_of(g) == Approx(3.0).epsilon(0.05));
  auto f = open_loop(
      "workload: {arrivals: {type: fixed, rate: 3}, prompt_tokens: 100, output_tokens: 10, "
      "duration_s: 10}\n");
  REQUIRE(f.size() == 29);  // 1/3 s .. 29/3 s; 30/3 = 10 s is not < duration
  CHECK(f[0].arrival == 333'333'333);
  CHECK(f[2].arrival == 1'000'000'000);
  CHECK(f.back().arrival == 9'666'666'667);
}

TEST_CASE("duration_s bounds arrivals and max_requests their count", "[workload]") {
  auto v = open_loop(
      "workload: {arrivals: {type: poisson, rate: 50}, prompt_tokens: 10, output_tokens: 1, "
      "duration_s: 60, max_requests: 1000000}\n");
  CHECK(v.back().arrival < 60 * kNsPerSecond);
  CHECK(static_cast<double>(v.size()) == Approx(3000).epsilon(0.06));
}

TEST_CASE("lognormal median/mean and a 90/10 mixture", "[workload][lengths]") {
  auto med = LengthDist::parse(ConfigNode::parse_string(
      "{type: lognormal, median: 2000, sigma: 0.8, max: 1000000}", "d.yaml"));
  auto mean = LengthDist::parse(ConfigNode::parse_string(
      "{type: lognormal, mean: 2000, sigma: 0.8, max: 1000000}", "d.yaml"));
  Rng r(5);
  std::vector<int64_t> xs;
  double msum = 0;
  for (int i = 0; i < 100001; ++i) {
    xs.push_back(med.sample(r));
    msum += static_cast<double>(mean.sample(r));
  }
  std::nth_element(xs.begin(), xs.begin() + 50000, xs.end());
  CHECK(static_cast<double>(xs[50000]) == Approx(2000).epsilon(0.02));
  CHECK(msum / 100001 == Approx(2000).epsilon(0.02));

  auto mix = LengthDist::parse(ConfigNode::parse_string(
      "{type: mixture, components: [{weight: 9, type: fixed, value: 512},\n"
      "                             {weight: 1, type: uniform, min: 30000, max: 32768}]}",
      "m.yaml"));
  int64_t longs = 0, n = 100000;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t x = mix.sample(r);
    REQUIRE((x == 512 || (x >= 30000 && x <= 32768)));
    longs += x >= 30000;
  }
  CHECK(static_cast<double>(longs) / static_cast<double>(n) == Approx(0.1).margin(0.005));
  CHECK(mix.max_value() == 32768);
}

TEST_CASE("a burst injects its requests at at_s, merged in time order", "[workload]") {
  auto v = open_loop(
      "workload:\n"
      "  arrivals: {type: fixed, rate: 1}\n"
      "  prompt_tokens: 100\n"
      "  output_tokens: 10\n"
      "  duration_s: 10\n"
      "  bursts: [{at_s: 5, count: 3, prompt_tokens: 32768, output_tokens: 256},\n"
      "           {at_s: 2.5, count: 2, over_s: 1, prompt_tokens: 8000, output_tokens: 1}]\n");
  REQUIRE(v.size() == 9 + 3 + 2);
  std::vector<std::pair<double, int64_t>> seen;
  for (const auto& r : v) seen.emplace_back(sim_to_seconds(r.arrival), r.prompt_tokens);
  std::vector<std::pair<double, int64_t>> expect = {
      {1, 100},   {2, 100},   {2.5, 8000}, {3, 100}, {3, 8000}, {4, 100}, {5, 100},
      {5, 32768}, {5, 32768}, {5, 32768},  {6, 100}, {7, 100},  {8, 100}, {9, 100}};
  CHECK(seen == expect);
  for (size_t i = 0; i < v.size(); ++i) CHECK(v[i].id == static_cast<int64_t>(i));
}

TEST_CASE("closed-loop clients honour think time, duration and max_requests", "[workload]") {
  Workload w = build(
      "workload:\n"
      "  clients: {type: closed_loop, count: 3, think_s: 2}\n"
      "  prompt_tokens: {type: fixed, value: 32768}\n"
      "  output_tokens: 256\n"
      "  duration_s: 100\n"
      "  max_requests: 5\n");
  REQUIRE(w.kind == Workload::Kind::kClosedLoop);
  REQUIRE(w.clients);
  CHECK(!w.source);
  ClosedLoopClients& c = *w.clients;
  REQUIRE(c.count() == 3);
  for (int i = 0; i < 3; ++i) {
    RequestSpec r = c.first_request(i);
    CHECK(r.arrival == 0);
    CHECK(r.client == i);
    CHECK(r.id == i);
    CHECK(r.prompt_tokens == 32768);
    CHECK(r.output_tokens == 256);
  }
  auto n1 = c.next_after_completion(1, 7 * kNsPerSecond);
  REQUIRE(n1);
  CHECK(n1->arrival == 9 * kNsPerSecond);  // finished at 7 s + 2 s think
  CHECK(n1->client == 1);
  CHECK(n1->id == 3);
  CHECK(!c.next_after_completion(0, 98 * kNsPerSecond + 1));  // 100 s + 1 ns is past duration
  REQUIRE(c.next_after_completion(2, 50 * kNsPerSecond));
  CHECK(!c.next_after_completion(1, 60 * kNsPerSecond));  // the 6th would exceed max_requests
  CHECK(c.requests_issued() == 5);
}

TEST_CASE("closed-loop: exponential think, stagger, per-client length streams, bursts",
          "[workload]") {
  const char* yaml =
      "workload:\n"
      "  clients: {type: closed_loop, count: 4, think_s: 1, think: exponential, stagger_s: 2}\n"
      "  prompt_tokens: {type: uniform, min: 1, max: 100000}\n"
      "  output_tokens: 16\n"
      "  duration_s: 1000000\n"
      "  bursts: [{at_s: 30, count: 2, prompt_tokens: 50000, output_tokens: 8}]\n";
  Workload a = build(yaml), b = build(yaml);
  CHECK(a.clients->first_request(1).arrival == 500'000'000);  // 1 * 2 s / 4
  CHECK(a.clients->first_request(3).arrival == 1'500'000'000);
  b.clients->first_request(3);
  b.clients->first_request(1);
  // Client 1's later requests have the same lengths whatever order the server ended things in.
  std::vector<int64_t> la, lb;
  double think_sum = 0;
  SimTime t = 0;
  constexpr int kN = 20000;
  for (int i = 0; i < kN; ++i) {
    auto ra = a.clients->next_after_completion(1, t);
    REQUIRE(ra);
    think_sum += sim_to_seconds(ra->arrival - t);
    t = ra->arrival + kNsPerSecond;
    la.push_back(ra->prompt_tokens);
  }
  for (int i = 0; i < 5; ++i) lb.push_back(b.clients->next_after_completion(1, 0)->prompt_tokens);
  CHECK(std::equal(lb.begin(), lb.end(), la.begin()));
  CHECK(think_sum / kN == Approx(1.0).epsilon(0.03));
  // The burst comes as an open-loop source sharing the id space.
  REQUIRE(a.source);
  auto burst = drain(*a.source);
  REQUIRE(burst.size() == 2);
  CHECK(burst[0].arrival == 30 * kNsPerSecond);
  CHECK(burst[0].prompt_tokens == 50000);
  CHECK(burst[0].client == -1);
  CHECK(burst[1].id == burst[0].id + 1);
}

TEST_CASE("workload config errors name the position", "[workload][config]") {
  CHECK_THROWS_WITH(build("workload: {arrivals: {type: poisson, rate: 5}, prompt_tokens: 10, "
                          "output_tokens: 1}\n"),
                    Contains("w.yaml:1:11: workload: open-loop arrivals need duration_s"));
  CHECK_THROWS_WITH(build("workload: {arrivals: {type: poison, rate: 5}, prompt_tokens: 10, "
                          "output_tokens: 1, duration_s: 1}\n"),
                    Contains("w.yaml:1:"));
  CHECK_THROWS_WITH(build("workload: {arrivals: {type: poisson, rate: 5}, prompt_tokens: 10, "
                          "output_tokens: 1, duration_s: 1, trace: {path: x.csv}}\n"),
                    Contains("exactly one of arrivals:, clients: or trace:"));
  CHECK_THROWS_WITH(build("workload: {arrivals: {type: poisson, rate: 5}, prompt_tokens: 10, "
                          "output_tokens: 1, duration_s: 1, max_request: 3}\n"),
                    Contains("unknown key 'max_request'; did you mean 'max_requests'?"));
  CHECK_THROWS_WITH(build("workload: {arrivals: {type: poisson, rate: 5}, output_tokens: 1,\n"
                          "  prompt_tokens: {type: lognormal, median: 10, mean: 12, sigma: 1},\n"
                          "  duration_s: 1}\n"),
                    Contains("give exactly one of median or mean"));
  CHECK_THROWS_WITH(
      build("workload: {arrivals: {type: fixed, rate: 5}, prompt_tokens: 10, "
            "output_tokens: 1, duration_s: 10,\n"
            "  bursts: [{at_s: 20, count: 1, prompt_tokens: 1, output_tokens: 1}]}\n"),
      Contains("w.yaml:2:"));
  CHECK_THROWS_WITH(build("workload: {clients: {type: closed_loop, count: 10}, prompt_tokens: 10, "
                          "output_tokens: 1, max_requests: 3}\n"),
                    Contains("at least one request per client"));
}

TEST_CASE("a trace workload reports its counters", "[workload][trace]") {
  auto root = ConfigNode::parse_string(
      "workload: {trace: {path: traces/azure-conv-2023.head2000.csv, max_requests: 10}}\n",
      std::string(KVSIM_TEST_DATA) + "/scenario.yaml");
  Workload w = make_workload(root.child("workload"), 1);
  REQUIRE(w.kind == Workload::Kind::kTrace);
  CHECK(drain(*w.source).size() == 10);
  CHECK(w.trace_counters->requests == 10);
}
