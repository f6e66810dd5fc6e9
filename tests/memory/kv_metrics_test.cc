// Time-weighted waste metrics (the untimed replay behind `kvsim mem` is tested in tests/engine).
#include <catch2/catch.hpp>

#include "models/memory/contiguous_store.h"
#include "models/memory/kv_metrics.h"
#include "models/memory/paged_store.h"

using namespace kvsim;

TEST_CASE("time-weighted means are ratios of integrals", "[memory][metrics]") {
  KvWasteAccumulator acc;
  acc.hold(0, {100, 0, 100, 0});   // 50% for 10 ns
  acc.hold(10, {300, 100, 0, 0});  // 75% for 30 ns
  const KvWasteSummary s = acc.summary(40);
  // live: 100*10 + 300*30 = 10,000; footprint: 200*10 + 400*30 = 14,000.
  CHECK(s.usage_efficiency == Approx(10000.0 / 14000.0));
  CHECK(s.reservation_fraction == Approx(1000.0 / 14000.0));
  CHECK(s.internal_fraction == Approx(3000.0 / 14000.0));
  CHECK(s.mean_footprint_bytes == Approx(350.0));
  CHECK(s.peak_footprint_bytes == 400);
  CHECK(s.usage_efficiency + s.reservation_fraction + s.internal_fraction + s.external_fraction ==
        Approx(1.0));
}

TEST_CASE("a ramp integrates a linear run exactly", "[memory][metrics]") {
  KvWasteAccumulator acc;
  acc.hold(0, {0, 0, 100, 0});
  acc.ramp(100, {100, 0, 0, 0});  // live 0 -> 100 while reservation 100 -> 0
  const KvWasteSummary s = acc.summary(100);
  CHECK(s.usage_efficiency == Approx(0.5));
  CHECK(s.reservation_fraction == Approx(0.5));
}
