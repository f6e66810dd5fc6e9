// The untimed replay behind `kvsim mem` (sim/engine/kv_replay.h) through real KV stores.
#include <catch2/catch.hpp>

#include "models/memory/contiguous_store.h"
#include "models/memory/kv_metrics.h"
#include "sim/engine/kv_replay.h"
#include "models/memory/paged_store.h"

using namespace kvsim;

TEST_CASE("replay: paged wastes under a block per request, max_len reservation mostly waste",
          "[engine][replay]") {
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

TEST_CASE("replay rejects what can never fit and counts failures", "[engine][replay]") {
  std::vector<ReplayRequest> reqs = {{100, 10, {}, 0}, {5000, 10, {}, 0}, {100, 10, {}, 0}};
  ContiguousStore s(1, {.arena_bytes = 100000, .reserve = ReservePolicy::kMaxLen, .max_len = 1000});
  const ReplayResult r = replay_kv(s, reqs, {});
  CHECK(r.completed == 2);
  CHECK(r.rejected == 1);
  CHECK(r.oom_too_long == 1);
}
