// The recorder's fast paths (the costs every run pays per request and per iteration)
// give exactly what the straightforward code gave: fmt's bytes, std::sort's order, a map's order.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "models/memory/kv_metrics.h"
#include "sim/metrics/distribution.h"
#include "sim/metrics/in_order_rows.h"
#include "sim/metrics/recorder.h"
#include "sim/metrics/row_format.h"
#include "sim/metrics/sort_doubles.h"

using namespace kvsim;

namespace {

// One cell written by `write` (a row_format function) into a buffer of the room it asks for.
template <typename Write, typename Value>
std::string cell(Write write, Value v) {
  char b[kMaxCellChars];
  char* end = write(b, v);
  REQUIRE(end - b <= static_cast<ptrdiff_t>(kMaxCellChars));
  return std::string(b, end);
}

std::string seconds_6(SimTime ns) { return cell(write_seconds_6, ns); }

std::string fmt_seconds_6(SimTime ns) { return fmt::format("{:.6f}", sim_to_seconds(ns)); }

}  // namespace

TEST_CASE("write_seconds_6 and write_seconds_3: fmt's {:.6f} and {:.3f} of ns / 1e9", "[metrics]") {
  // Microseconds rounded from nanoseconds: 1,234,567,499 ns -> 1.234567 s (499 < 500),
  // 1,234,567,501 ns -> 1.234568 s (501 > 500); 999,999,999,600 ns rounds up across every digit.
  CHECK(seconds_6(0) == "0.000000");
  CHECK(seconds_6(1'234'567'499) == "1.234567");
  CHECK(seconds_6(1'234'567'501) == "1.234568");
  CHECK(seconds_6(999'999'999'600) == "1000.000000");
  CHECK(seconds_6(42) == "0.000000");
  CHECK(seconds_6(501) == "0.000001");
  // A tie: 7,812,500 ns is 1/128 s = 0.0078125 exactly; it goes to fmt, so whatever fmt writes.
  CHECK(seconds_6(7'812'500) == fmt_seconds_6(7'812'500));
  // Negative and past the integer path's bound (4e6 s): fmt too.
  CHECK(seconds_6(-1'500) == fmt_seconds_6(-1'500));
  CHECK(seconds_6(4'000'000 * kNsPerSecond + 123'456'789) ==
        fmt_seconds_6(4'000'000 * kNsPerSecond + 123'456'789));
  // Everywhere else the same bytes as fmt: random times up to 5e6 s, and times a few ns from a
  // tie (where the double's rounding error matters most).
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<SimTime> any(0, 5'000'000 * kNsPerSecond);
  std::uniform_int_distribution<SimTime> near(-3, 3);
  for (int i = 0; i < 200'000; ++i) {
    const SimTime a = any(rng);
    REQUIRE(seconds_6(a) == fmt_seconds_6(a));
    const SimTime b = std::max<SimTime>(0, a / 1000 * 1000 + 500 + near(rng));
    REQUIRE(seconds_6(b) == fmt_seconds_6(b));
    // Three decimals: ties at 500,000 ns past a millisecond.
    const SimTime c = std::max<SimTime>(0, a / 1'000'000 * 1'000'000 + 500'000 + near(rng));
    REQUIRE(cell(write_seconds_3, a) == fmt::format("{:.3f}", sim_to_seconds(a)));
    REQUIRE(cell(write_seconds_3, c) == fmt::format("{:.3f}", sim_to_seconds(c)));
  }
  // 1,234,499,999 ns -> 1.234 s; 1,234,500,001 ns -> 1.235 s; the tie 1/128 s = 0.0078125 s is
  // not one at three decimals (7,812,500 ns % 10^6 = 812,500): 0.008.
  CHECK(cell(write_seconds_3, 1'234'499'999) == "1.234");
  CHECK(cell(write_seconds_3, 1'234'500'001) == "1.235");
  CHECK(cell(write_seconds_3, 7'812'500) == "0.008");
  CHECK(cell(write_seconds_3, 500'000) == fmt::format("{:.3f}", 0.0005));
}

TEST_CASE("write_fixed_6: fmt's {:.6f} of any double", "[metrics]") {
  auto six = [](double x) { return cell(write_fixed_6, x); };
  // 0.1234564 x 10^6 = 123456.4 -> 0.123456; 0.1234566 -> 123456.6 -> 0.123457; 2.9999996 rounds
  // up across every digit; 0.5e-6 is a near-tie (fmt decides).
  CHECK(six(0.0) == "0.000000");
  CHECK(six(0.1234564) == "0.123456");
  CHECK(six(0.1234566) == "0.123457");
  CHECK(six(2.9999996) == "3.000000");
  CHECK(six(0.5e-6) == fmt::format("{:.6f}", 0.5e-6));
  CHECK(six(-0.0) == "-0.000000");
  CHECK(six(-1.25) == "-1.250000");
  CHECK(six(2e9) == "2000000000.000000");
  CHECK(six(-std::numeric_limits<double>::max()) ==
        fmt::format("{:.6f}", -std::numeric_limits<double>::max()));  // the longest cell
  CHECK(six(std::numeric_limits<double>::quiet_NaN()) ==
        fmt::format("{:.6f}", std::numeric_limits<double>::quiet_NaN()));
  // Random doubles over many magnitudes, quotients like TPOT's, and values a few ulps from a
  // tie (k + 0.5) x 10^-6.
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<double> mantissa(1, 10);
  std::uniform_int_distribution<int> exponent(-9, 8);
  std::uniform_int_distribution<int64_t> micros(0, 100'000'000);
  std::uniform_int_distribution<int> ulps(-4, 4);
  for (int i = 0; i < 200'000; ++i) {
    const double a = mantissa(rng) * std::pow(10.0, exponent(rng));
    REQUIRE(six(a) == fmt::format("{:.6f}", a));
    const double q = static_cast<double>(micros(rng)) / static_cast<double>(1 + i % 997);
    REQUIRE(six(q) == fmt::format("{:.6f}", q));
    double t = (static_cast<double>(micros(rng)) + 0.5) / 1e6;
    for (int u = ulps(rng); u != 0; u += u > 0 ? -1 : 1) {
      t = std::nextafter(t, u > 0 ? 1e300 : 0.0);
    }
    REQUIRE(six(t) == fmt::format("{:.6f}", t));
  }
}

TEST_CASE("write_seconds_9 and write_int: fmt's bytes", "[metrics]") {
  auto nine = [](SimTime ns) { return cell(write_seconds_9, ns); };
  // 1,500,000,007 ns: 1 s and 500,000,007 ns, zero-padded to nine digits.
  CHECK(nine(1'500'000'007) == "1.500000007");
  CHECK(nine(0) == "0.000000000");
  CHECK(nine(12) == "0.000000012");
  CHECK(nine(-5) ==
        fmt::format("{}.{:09d}", SimTime{-5} / kNsPerSecond, SimTime{-5} % kNsPerSecond));
  auto integer = [](int64_t v) { return cell(write_int, v); };
  CHECK(integer(-42) == "-42");
  CHECK(integer(0) == "0");
  CHECK(integer(7) == "7");
  CHECK(integer(100) == "100");
  CHECK(integer(std::numeric_limits<int64_t>::max()) == "9223372036854775807");
  CHECK(integer(std::numeric_limits<int64_t>::min()) == "-9223372036854775808");
  // Every digit count's edges (10^k - 1, 10^k, 10^k + 1), where a count computed from the bit
  // length must be corrected by one, both signs.
  int64_t power = 1;  // 10^k; 10^19 is past int64
  for (int k = 0; k <= 18; ++k) {
    for (const int64_t v : {power - 1, power, power + 1}) {
      REQUIRE(integer(v) == fmt::format("{}", v));
      REQUIRE(integer(-v) == fmt::format("{}", -v));
    }
    if (k < 18) power *= 10;
  }
  std::mt19937_64 rng(3);
  for (int i = 0; i < 10'000; ++i) {
    const auto v = static_cast<int64_t>(rng()) >> (i % 64);
    REQUIRE(integer(v) == fmt::format("{}", v));
  }
}

TEST_CASE("InOrderRows: rows leave in id order, as from a map of waiting rows", "[metrics]") {
  std::string out;
  auto sink = [&](std::string_view row) { out += row; };
  InOrderRows rows;
  // 2 and 3 wait for 0 and 1; 0 goes at once; 1 unblocks 2 and 3; 5 waits for 4, which never
  // comes: flush() writes it, leaving the gap.
  rows.put(2, "c", sink);
  rows.put(3, "d", sink);
  CHECK(out.empty());
  rows.put(0, "a", sink);
  CHECK(out == "a");
  rows.put(1, "b", sink);
  CHECK(out == "abcd");
  rows.put(5, "f", sink);
  CHECK(out == "abcd");
  rows.flush(sink);
  CHECK(out == "abcdf");

  // A window wider than the ring's first size (64): 199 .. 1 wait, then 0 lets all 200 go.
  out.clear();
  InOrderRows wide;
  std::string expect;
  for (int64_t id = 199; id >= 1; --id) wide.put(id, fmt::format("{};", id), sink);
  CHECK(out.empty());
  wide.put(0, "0;", sink);
  for (int64_t id = 0; id < 200; ++id) expect += fmt::format("{};", id);
  CHECK(out == expect);

  // A repeated id: in a map the second row of id 0 (already written) would wait until flush and,
  // being the smallest key, hold back every waiting row: 1 goes (it is next), 3 waits behind 2,
  // and 2, arriving next, goes; 3 stays until flush, after the late 0.
  out.clear();
  InOrderRows late;
  late.put(0, "a", sink);
  late.put(0, "A", sink);
  late.put(1, "b", sink);
  late.put(3, "d", sink);
  late.put(2, "c", sink);
  CHECK(out == "abc");
  late.flush(sink);
  CHECK(out == "abcAd");

  // An id past the ring's window waits in a map; flush() merges it in id order.
  out.clear();
  InOrderRows far;
  far.put(InOrderRows::kMaxRingWindow + 1, "z", sink);
  far.put(2, "c", sink);
  far.flush(sink);
  CHECK(out == "cz");
}

TEST_CASE("sort_doubles: std::sort's sequence", "[metrics]") {
  std::vector<double> small = {3.5, 0.0, 1e-9, 2.0, 0.0};
  sort_doubles(small);
  CHECK(small == std::vector<double>{0.0, 0.0, 1e-9, 2.0, 3.5});
  // Radix-sorted sizes: repeated values, zeros, subnormals, infinity.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 100);
  std::vector<double> v;
  for (int i = 0; i < 50'000; ++i) v.push_back(i % 7 == 0 ? 0.25 * (i % 5) : u(rng));
  v.push_back(std::numeric_limits<double>::infinity());
  v.push_back(std::numeric_limits<double>::denorm_min());
  std::vector<double> ref = v;
  std::sort(ref.begin(), ref.end());
  sort_doubles(v);
  CHECK(v == ref);
  // A negative sample: std::sort itself.
  v.push_back(-1.0);
  std::shuffle(v.begin(), v.end(), rng);
  sort_doubles(v);
  CHECK(v.front() == -1.0);
  CHECK(std::is_sorted(v.begin(), v.end()));
  // Keys that differ only in some digits skip the other passes, so the sorted keys end in
  // either buffer: whole numbers (low mantissa digits all zero), a narrow range (high digits all
  // equal), one value (every pass skipped), and halves of one binade.
  for (int kind = 0; kind < 4; ++kind) {
    std::vector<double> w;
    for (int i = 0; i < 5'000; ++i) {
      const double x = kind == 0   ? static_cast<double>(rng() % 4096)
                       : kind == 1 ? 1.0 + static_cast<double>(rng() % 1'000'000) * 1e-15
                       : kind == 2 ? 0.5
                                   : 1.0 + static_cast<double>(rng() % 2048) / 2048.0;
      w.push_back(x);
    }
    std::vector<double> sorted = w;
    std::sort(sorted.begin(), sorted.end());
    sort_doubles(w);
    INFO("kind " << kind);
    CHECK(w == sorted);
  }
}

TEST_CASE("CountDistribution: values outside the dense range count as well", "[metrics]") {
  // Samples -3, 5, 5, 70000 (-3 and 70000 outside [0, 65536)). Sorted: p50 at position 1.5 ->
  // 5; p90 at 2.7 -> 5 + (70000 - 5) x 0.7 = 49001.5; mean 70007 / 4 = 17501.75.
  CountDistribution d;
  for (int64_t v : {5, 70000, -3, 5}) d.add(v);
  const LatencyStats s = d.stats();
  CHECK(s.count == 4);
  CHECK(s.p50 == 5.0);
  CHECK(s.p90 == Approx(49001.5).epsilon(1e-12));
  CHECK(s.mean == 17501.75);
  // Histogram over [-3, 70001): 70004 integers, ceil(70004 / 32) = 2188 per bin, 32 bins of
  // width 2188 from -3: -3 and both 5s in bin 0, 70000 in bin floor(70003 / 2188) = 31.
  const Histogram h = d.histogram();
  REQUIRE(h.counts.size() == 32);
  CHECK(h.edges.front() == -3.0);
  CHECK(h.edges[1] == 2185.0);
  CHECK(h.counts[0] == 3);
  CHECK(h.counts[31] == 1);
}

TEST_CASE("LogDistribution::bucket: the logarithm's bucket, cached or not", "[metrics]") {
  // By hand: 1 ns -> log 1 = 0 -> bucket 0; 2 ns -> log 2 / log 1.01 = 69.66 -> 69;
  // 1 ms = 10^6 ns -> 13.8155 / 0.00995033 = 1388.45 -> 1388; 0 and negatives -> -1.
  LogDistribution d;
  CHECK(d.bucket(1) == 0);
  CHECK(d.bucket(2) == 69);
  CHECK(d.bucket(1'000'000) == 1388);
  CHECK(d.bucket(0) == -1);
  CHECK(d.bucket(-7) == -1);
  // Against the formula: a slowly drifting duration (what the cache serves), jumps across
  // magnitudes, two buckets in turn, and values past the cached range.
  std::mt19937_64 rng(11);
  SimTime ns = 20'000'000;
  std::uniform_int_distribution<SimTime> drift(-40, 400);
  std::uniform_int_distribution<int> magnitude(0, 15);
  for (int i = 0; i < 1'000'000; ++i) {
    ns = std::max<SimTime>(1, ns + drift(rng));
    REQUIRE(d.bucket(ns) == LogDistribution::bucket_of(ns));
    if (i % 1000 == 0) {
      const auto jump = static_cast<SimTime>(rng() % 1000 + 1) *
                        static_cast<SimTime>(std::pow(10.0, magnitude(rng)));
      REQUIRE(d.bucket(jump) == LogDistribution::bucket_of(jump));
    }
  }
  // Every ns up to 300,000 in order: buckets narrower than 1 ns (some hold no integer) below
  // 100 ns, then each bucket's whole range from its first ns to the next one's.
  LogDistribution in_order;
  for (SimTime a = 1; a <= 300'000; ++a)
    REQUIRE(in_order.bucket(a) == LogDistribution::bucket_of(a));
  for (SimTime a = 1'000; a < 3'000; ++a) {
    REQUIRE(d.bucket(a) == LogDistribution::bucket_of(a));
    REQUIRE(d.bucket(a * 7'919) == LogDistribution::bucket_of(a * 7'919));
  }
  for (SimTime big : {LogDistribution::kCachedBelowNs - 1, LogDistribution::kCachedBelowNs,
                      LogDistribution::kCachedBelowNs * 3}) {
    REQUIRE(d.bucket(big) == LogDistribution::bucket_of(big));
  }
}

TEST_CASE("LogDistribution::add_sorted counts as add() of each value", "[metrics]") {
  // By hand: 1 ns is bucket 0, 2 ns bucket 69, 10^6 ns bucket 1388 (above); {0, 1, 1, 2, 2, 2,
  // 10^6} adds one sample at -1, two at 0, three at 69 and one at 1388: the median (4th of 7)
  // is bucket 69's middle, 1.01^69.5 ns = 1.996 ns, and the mean is 1,000,008 / 7 ns.
  const std::vector<SimTime> by_hand = {0, 1, 1, 2, 2, 2, 1'000'000};
  LogDistribution sorted;
  sorted.add_sorted(
      7, [&](int64_t j) { return by_hand[static_cast<size_t>(j)]; }, 1'000'008);
  CHECK(sorted.count() == 7);
  CHECK(sorted.stats_seconds().p50 == Approx(std::pow(1.01, 69.5) / 1e9));
  CHECK(sorted.stats_seconds().mean == Approx(1'000'008.0 / 7 / 1e9));
  // Random non-decreasing runs (a decode run's durations: drifting, staying, jumping, past the
  // cached range), in several calls, against add() one by one: the same figures to the bit.
  std::mt19937_64 rng(23);
  LogDistribution one_by_one, at_once;
  for (int run = 0; run < 2'000; ++run) {
    std::vector<SimTime> ns;
    SimTime v = static_cast<SimTime>(rng() % 50'000'000);
    const auto k = static_cast<int>(rng() % 300);
    Int128 sum = 0;
    for (int j = 0; j < k; ++j) {
      const auto roll = rng() % 10;
      v += roll == 0  ? static_cast<SimTime>(rng() % 5'000'000)
           : roll < 3 ? 0
                      : static_cast<SimTime>(rng() % 300);
      if (run % 500 == 7) v += LogDistribution::kCachedBelowNs / 200;
      ns.push_back(v);
      sum += v;
      one_by_one.add(v);
    }
    at_once.add_sorted(
        k, [&](int64_t j) { return ns[static_cast<size_t>(j)]; }, sum);
  }
  REQUIRE(at_once.count() == one_by_one.count());
  const LatencyStats a = at_once.stats_seconds(), b = one_by_one.stats_seconds();
  CHECK(a.p50 == b.p50);
  CHECK(a.p90 == b.p90);
  CHECK(a.p99 == b.p99);
  CHECK(a.mean == b.mean);
  const Histogram ha = at_once.histogram_seconds(), hb = one_by_one.histogram_seconds();
  CHECK(ha.edges == hb.edges);
  CHECK(ha.counts == hb.counts);
}

TEST_CASE("ExactSum: exact past int64, in any order, k equal values at once", "[metrics]") {
  // Small values: 1 + 2 + ... + 100 = 5050.
  ExactSum small;
  for (int64_t v = 1; v <= 100; ++v) small.add(v);
  CHECK(small.value() == 5050.0L);
  // Past int64: 2^62 three times, -5, 7, -2^62, 2^40 sum to 2^63 + 2^40 + 2 (64 significant
  // bits: a long double holds it exactly), in this order and reversed.
  const int64_t big = int64_t{1} << 62;
  const std::vector<int64_t> vs = {big, big, big, int64_t{-5}, int64_t{7}, -big, int64_t{1} << 40};
  ExactSum forward, backward;
  for (size_t i = 0; i < vs.size(); ++i) {
    forward.add(vs[i]);
    backward.add(vs[vs.size() - 1 - i]);
  }
  const long double expected = 9223372036854775808.0L + 1099511627776.0L + 2.0L;
  CHECK(forward.value() == expected);
  CHECK(backward.value() == expected);
  // add(v, k) is k add(v): 3 x 2^62 at once, then the rest.
  ExactSum counted;
  counted.add(big, 3);
  counted.add(2);
  counted.add(-big);
  counted.add(int64_t{1} << 40);
  CHECK(counted.value() == expected);
}

TEST_CASE("KvWasteAccumulator: two samples at one instant add no area", "[metrics]") {
  // Live 100 B from t=0, then at t=10 two samples (200 B, then 300 B), summarised at t=20:
  // ∫live = 100 x 10 + 300 x 10 = 4000 B ns over 20 ns: mean 200 B; the 200 B lasted no time.
  KvWasteAccumulator acc;
  acc.hold(0, {100, 0, 0, 0});
  acc.hold(10, {200, 0, 0, 0});
  acc.hold(10, {300, 0, 0, 0});
  const KvWasteSummary s = acc.summary(20);
  CHECK(s.mean_live_bytes == 200.0);
  CHECK(s.peak_live_bytes == 300);
  CHECK(s.usage_efficiency == 1.0);
}
