// The untimed replay behind `kvsim mem` (sim/engine/kv_replay.h) through real KV stores.
#include <catch2/catch.hpp>

#include "models/memory/contiguous_store.h"
#include "models/memory/kv_metrics.h"
#include "models/memory/paged_store.h"
#include "sim/engine/kv_replay.h"

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

  ContiguousStore maxlen(
      1000, {.arena_bytes = 64000 * 1000, .reserve = ReservePolicy::kMaxLen, .max_len = 2048});
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

TEST_CASE("Orca (Max) on OPT-13B's 15,728 slots: 7 requests fit and 8.85% is never used",
          "[memory][buddy][figure2]") {
  // The vLLM paper's Figure 2 gives Orca (Max) 8.9% "external frag. & others": with 2,048 slots
  // reserved per request, 7 fit in 15,728 (Fig. 13's 7.00 batched requests) and
  // 15,728 - 7 x 2,048 = 1,392 slots (8.85%) stay free all the time.
  //
  // 14 identical requests (prompt 100, 100 new tokens), admitted 7 at a time: each batch lives
  // 100 iterations, during which every request grows linearly from 100 to 200 tokens (mean 150)
  // and its reservation shrinks from 100 to 0 (mean 50). Over the KV space (15,728 slots):
  //   token states = 7 x 150 / 15,728 = 6.676%;  reservation = 7 x 50 / 15,728 = 2.225%;
  //   internal = 7 x (2,048 - 200) / 15,728 = 82.248%;  external & other = 1,392 / 15,728 = 8.850%.
  constexpr int64_t kOptSlotsFig2 = 15'728;  // OPT-13B's 12 GiB of KV in 819,200-byte tokens
  constexpr int64_t bpt = 1000;
  ContiguousStore store(bpt, {.arena_bytes = kOptSlotsFig2 * bpt,
                              .reserve = ReservePolicy::kMaxLen,
                              .fit = FitPolicy::kBuddy,
                              .max_len = 2048});
  std::vector<ReplayRequest> reqs(14, ReplayRequest{.prompt_tokens = 100, .output_tokens = 100});
  ReplayOptions o;
  o.max_inflight = 1'000'000;  // memory-bound, as a backlogged server is
  o.check_invariants = true;
  const ReplayResult r = replay_kv(store, reqs, o);
  CHECK(r.completed == 14);
  CHECK(r.peak_inflight == 7);
  CHECK(r.iterations == 200);
  const KvWasteSummary& f = r.of_kv_space;
  CHECK(f.usage_efficiency == Approx(7.0 * 150 / kOptSlotsFig2));
  CHECK(f.reservation_fraction == Approx(7.0 * 50 / kOptSlotsFig2));
  CHECK(f.internal_fraction == Approx(7.0 * 1848 / kOptSlotsFig2));
  CHECK(f.external_fraction == Approx(1392.0 / kOptSlotsFig2));
  CHECK(f.external_fraction == Approx(0.0885).margin(0.0001));
}
