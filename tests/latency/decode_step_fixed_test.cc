// The engine times every decode-only step with DecodeStepFixed (the affine decode cost in fixed
// point), in stepping and fast-forward alike. It must be the latency model's step, rounded to
// the nanosecond as seconds_to_sim rounds iteration().seconds, except within a hair of a tie.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "core/sim_time.h"
#include "tests/latency/latency_test_util.h"

using namespace kvsim;
using kvsim::test::make_model;

TEST_CASE("DecodeStepFixed rounds a + b T to the nearest ns, ties up, at least 1 ns",
          "[latency][fastforward]") {
  // a = 10.5 ns, b = 0.25 ns per token, in units of 2^-40 ns:
  //   T = 0: 10.5 -> 11 (a tie goes up); T = 1: 10.75 -> 11; T = 3: 11.25 -> 11;
  //   T = 4: 11.5 -> 12; T = 1000: 260.5 -> 261.
  DecodeStepFixed f;
  const Int128 unit = Int128{1} << DecodeStepFixed::kNsShift;
  f.ns_a = 21 * unit / 2;
  f.ns_b = unit / 4;
  CHECK(f.duration_ns(0) == 11);
  CHECK(f.duration_ns(1) == 11);
  CHECK(f.duration_ns(3) == 11);
  CHECK(f.duration_ns(4) == 12);
  CHECK(f.duration_ns(1000) == 261);
  // The walk over T = 0, 4, 8, ...: 11, 12, 13, ... (10.5 + 0.25 T, ties up), as duration_ns.
  DecodeStepFixed::Walk walk(f, 0, 4);
  CHECK(walk.ns() == 11);
  walk.next();
  CHECK(walk.ns() == 12);
  DecodeStepFixed::Walk far(f, 3, 7);
  for (int64_t j = 0; j < 1000; ++j, far.next()) REQUIRE(far.ns() == f.duration_ns(3 + 7 * j));
  // A step is never shorter than 1 ns (as std::max(1, seconds_to_sim(s)) for every iteration).
  DecodeStepFixed zero;
  CHECK(zero.duration_ns(5) == 1);
  // FLOPs: 3.5 + 2 T in units of 2^-8, exact.
  f.flops_a = 7 * (Int128{1} << DecodeStepFixed::kFlopsShift) / 2;
  f.flops_b = 2 * (Int128{1} << DecodeStepFixed::kFlopsShift);
  CHECK(f.flops_fixed(10) == 47 * (Int128{1} << DecodeStepFixed::kFlopsShift) / 2);
  CHECK(flops_to_fixed(23.5) == 47 * (Int128{1} << DecodeStepFixed::kFlopsShift) / 2);
}

TEST_CASE("DecodeStepFixed::Walk::ends_before: the steps' ends when all come before a time",
          "[latency][fastforward]") {
  // Hand-worked: durations 11, 12, 13, 14 from 100: ends 111, 123, 136, 150, sum 520; with
  // weights 0, 2, 1, 3: 2·123 + 136 + 3·150 = 832. Before 151 all four end in time; the bound
  // (the unrounded sum, 10.5·4 + 0.25·(0+4+8+12) + the four halves = 50) is 150 + 0, so 150 is
  // refused (false, nothing moved) though the last ends at 150.
  using EndSums = DecodeStepFixed::Walk::EndSums;
  const Int128 unit = Int128{1} << DecodeStepFixed::kNsShift;
  DecodeStepFixed f;
  f.ns_a = 21 * unit / 2;
  f.ns_b = unit / 4;
  int64_t out[4] = {};
  const int64_t weights[4] = {0, 2, 1, 3};
  EndSums sums;
  DecodeStepFixed::Walk w(f, 0, 4);
  CHECK_FALSE(w.ends_before(out, 4, 100, 150, weights, 3, sums));
  CHECK(w.ns() == 11);
  REQUIRE(w.ends_before(out, 4, 100, 151, weights, 3, sums));
  CHECK(sums.ends == 520);
  CHECK(sums.weighted == 832);
  CHECK(out[0] == 111);
  CHECK(out[1] == 123);
  CHECK(out[2] == 136);
  CHECK(out[3] == 150);
  CHECK(w.ns() == 15);
  // Random walks against ns()/next(): when it answers, the ends and sums are exact and all
  // before the time; when it declines, the walk has not moved.
  std::mt19937_64 rng(31);
  int answered = 0, declined = 0;
  for (int i = 0; i < 3000; ++i) {
    DecodeStepFixed g;
    const int scale = static_cast<int>(rng() % 40);
    g.ns_a =
        static_cast<Int128>(rng() >> (64 - scale - 1)) * unit / 3 - (i % 7 == 0 ? 50 * unit : 0);
    g.ns_b = static_cast<Int128>(rng() >> static_cast<int>(rng() % 64)) * (i % 11 == 0 ? -1 : 1);
    DecodeStepFixed::Walk a(g, static_cast<int64_t>(rng() % 100000),
                            static_cast<int64_t>(rng() % 300));
    DecodeStepFixed::Walk b = a;
    const auto n = static_cast<int64_t>(1 + rng() % 200);
    const auto from = static_cast<int64_t>(rng() % 1'000'000);
    const bool weighted = rng() % 4 != 0;
    const auto most_weight = static_cast<int64_t>(rng() % 300);
    std::vector<int64_t> ends, ws;
    int64_t e = from, sum = 0;
    Int128 wsum = 0;
    for (int64_t k = 0; k < n; ++k, b.next()) {
      e += b.ns();
      ends.push_back(e);
      sum += e;
      ws.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(most_weight + 1)));
      wsum += static_cast<Int128>(ws.back()) * e;
    }
    // A time past the last end, at it, or somewhere inside.
    const int64_t before =
        rng() % 3 == 0   ? e + 1 + static_cast<int64_t>(rng() % 1000)
        : rng() % 2 == 0 ? e
                         : from + static_cast<int64_t>(rng() % static_cast<uint64_t>(e - from + 1));
    std::vector<int64_t> out2(static_cast<size_t>(n));
    DecodeStepFixed::Walk c = a;
    EndSums got;
    const bool answers = c.ends_before(out2.data(), n, from, before, weighted ? ws.data() : nullptr,
                                       most_weight, got);
    INFO("walk " << i << " n " << n);
    if (!answers) {
      ++declined;
      REQUIRE(c.ns() == a.ns());
      REQUIRE(c.ns_at(3) == a.ns_at(3));
      continue;
    }
    ++answered;
    REQUIRE(ends.back() < before);
    REQUIRE(got.ends == sum);
    REQUIRE(got.weighted == (weighted ? wsum : 0));
    REQUIRE(out2 == ends);
    REQUIRE(c.ns() == b.ns());
  }
  CHECK(answered > 500);
  CHECK(declined > 500);
}

TEST_CASE("DecodeStepFixed is the latency model's decode step to the nanosecond",
          "[latency][fastforward][property]") {
  struct Setup {
    const char* model;
    AttentionKind attention;
    int tp;
    const char* gpu;
  };
  const Setup setups[] = {{"llama-3-8b", AttentionKind::kFlash, 1, "a100-sxm4-80gb"},
                          {"seed-7b-mha", AttentionKind::kNative, 1, "a100-sxm4-80gb"},
                          {"mixtral-8x7b", AttentionKind::kFlash, 2, "h100-sxm"},
                          {"qwen2.5-7b", AttentionKind::kFlash, 1, "h100-sxm"},
                          {"mistral-7b", AttentionKind::kFlash, 1, "a100-sxm4-80gb"}};
  std::mt19937_64 rng(17);
  int64_t steps = 0, ties = 0;
  for (const Setup& s : setups) {
    const LatencyModel m = make_model(s.model, s.attention, 0, s.tp, s.gpu);
    for (const int block : {0, 16, 32}) {
      for (int i = 0; i < 400; ++i) {
        const int64_t n = 1 + static_cast<int64_t>(rng() % 512);
        const int64_t t = n + static_cast<int64_t>(rng() % static_cast<uint64_t>(n * 32000));
        const DecodeStepFixed& f = m.decode_step_fixed(n, block);
        const double seconds = m.decode_step_seconds(n, t, block);
        const double ns = seconds * 1e9;
        ++steps;
        if (std::abs(ns - std::floor(ns) - 0.5) < 1e-6) {
          ++ties;  // the two roundings may part here
          CHECK(std::abs(f.duration_ns(t) - ns) <= 0.5 + 1e-6);
          continue;
        }
        INFO(s.model << " n=" << n << " T=" << t << " block=" << block << " seconds=" << seconds);
        REQUIRE(f.duration_ns(t) == std::max<SimTime>(1, seconds_to_sim(seconds)));
        BatchShape b;
        b.block_tokens = block;
        b.decode_seqs = n;
        b.decode_context_tokens = t;
        const double flops = m.iteration(b, OpDetail::kTotals).flops;
        const auto fixed = static_cast<long double>(f.flops_fixed(t));
        REQUIRE(std::abs(std::ldexp(fixed, -DecodeStepFixed::kFlopsShift) - flops) <=
                1e-9L * flops);
      }
    }
  }
  CHECK(steps == 6000);
  CHECK(ties <= 1);  // one in a million steps, at most a few here
}
