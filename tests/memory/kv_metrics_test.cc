// Time-weighted waste metrics and the untimed replay behind `kvsim mem`.
#include <catch2/catch.hpp>

#include "models/memory/contiguous_store.h"
#include "models/memory/kv_metrics.h"
#include "models/memory/kv_replay.h"
#include "models/memory/paged_store.h"

using namespace kvsim;

TEST_CASE("time-weighted means are ratios of integrals", "[memory][metrics]") {
  KvWasteAccumulator acc;
  acc.hold(0, {100, 0, 100, 0});  // 50% for 10 ns
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

TEST_CASE("replay: paged wastes under a block per request, max_len reservation mostly waste",
          "[memory][replay]") {
  std::vector<ReplayRequest> reqs;
  for (int i = 0; i < 300; ++i) reqs.push_back({100 + (i * 37) % 900, 20 + (i * 53) % 300, {}, 0});
  PagedStore paged(1000, {.block_tokens = 16, .num_blocks = 4000});
  ReplayOptions o;
  o.max_inflight = 32;
  o.check_invariants = true;
  const ReplayResult p = replay_kv(paged, reqs, o);
  CHECK(p.completed == 300);
  CHECK(p.alloc_failures == 0);
  CHECK(p.waste.usage_efficiency > 0.96);
  CHECK(paged.free_blocks() == 4000);
  CHECK(p.events < p.iterations);  // decode runs were fast-forwarded

  ContiguousStore maxlen(1000, {.arena_bytes = 64000 * 1000, .reserve = ReservePolicy::kMaxLen,
                                .max_len = 2048});
  const ReplayResult c = replay_kv(maxlen, reqs, o);
  CHECK(c.completed == 300);
  CHECK(c.waste.usage_efficiency < 0.5);
  CHECK(c.waste.internal_fraction > 0.4);
  CHECK(c.alloc_failures > 0);  // 31 x 2048 tokens fill the 64k-token arena
}

TEST_CASE("replay rejects what can never fit and counts failures", "[memory][replay]") {
  std::vector<ReplayRequest> reqs = {{100, 10, {}, 0}, {5000, 10, {}, 0}, {100, 10, {}, 0}};
  ContiguousStore s(1, {.arena_bytes = 100000, .reserve = ReservePolicy::kMaxLen, .max_len = 1000});
  const ReplayResult r = replay_kv(s, reqs, {});
  CHECK(r.completed == 2);
  CHECK(r.rejected == 1);
  CHECK(r.oom_too_long == 1);
}
