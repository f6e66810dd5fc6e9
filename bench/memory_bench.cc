// Allocate/free throughput of the KV stores and the caching-allocator model, on one core.
// One JSON line per point: {"bench":"memory","store":...,"op":...,"ops_per_s_median":...}.
// Axes: store x configuration; each point runs 7 samples after a warm-up, median and p90 reported.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/units.h"
#include "models/catalog.h"
#include "models/memory/caching_allocator.h"
#include "models/memory/caching_allocator_store.h"
#include "models/memory/contiguous_store.h"
#include "models/memory/paged_store.h"

using namespace kvsim;

namespace {

constexpr int kSamples = 7;

// Runs `body` (which returns the number of operations it did) kSamples times after a warm-up.
void measure(const std::string& store, const std::string& config, const std::string& op,
             const std::function<int64_t()>& body) {
  body();  // warm-up
  std::vector<double> rates;
  for (int i = 0; i < kSamples; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t ops = body();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(static_cast<double>(ops) / s);
  }
  std::sort(rates.begin(), rates.end());
  nlohmann::ordered_json j;
  j["bench"] = "memory";
  j["store"] = store;
  j["config"] = config;
  j["op"] = op;
  j["samples"] = kSamples;
  j["ops_per_s_median"] = std::round(rates[kSamples / 2]);
  j["ops_per_s_p90_low"] = std::round(rates[kSamples / 10]);  // 90% of samples ran faster
  j["ops_per_s_max"] = std::round(rates.back());
  const char* sha = std::getenv("KVSIM_GIT_SHA");
  j["git_sha"] = sha ? sha : "unknown";
  fmt::print("{}\n", j.dump());
  std::fflush(stdout);
}

// Paged: 1024 requests in flight; each allocates one block, grows block by block to 64 blocks,
// then frees them all. Operations = blocks allocated + blocks freed.
int64_t paged_cycle(PagedStore& s, bool prefix) {
  constexpr int kReqs = 1024, kBlocks = 64;
  int64_t ops = 0;
  std::vector<uint64_t> h = {1, 2, 3, 4};
  for (int round = 0; round < 4; ++round) {
    for (int r = 0; r < kReqs; ++r) {
      s.allocate(r, 16, 16 * kBlocks,
                 {prefix ? std::span<const uint64_t>(h) : std::span<const uint64_t>(), 16});
    }
    for (int b = 2; b <= kBlocks; ++b) {
      for (int r = 0; r < kReqs; ++r) s.grow(r, 16 * b);
    }
    for (int r = 0; r < kReqs; ++r) s.release(r);
    ops += int64_t{2} * kReqs * kBlocks;
  }
  return ops;
}

// Contiguous: 256 regions of random sizes live at a time; each op frees one and allocates one.
int64_t contiguous_cycle(ContiguousStore& s, std::mt19937_64& rng) {
  constexpr int kLive = 256, kOps = 200'000;
  std::uniform_int_distribution<int64_t> len(16, 4096);
  for (int r = 0; r < kLive; ++r) {
    const int64_t l = len(rng);
    s.allocate(r, l, l);
  }
  for (int i = 0; i < kOps; ++i) {
    const int r = i % kLive;
    if (s.holds(r)) s.release(r);
    const int64_t l = len(rng);
    s.allocate(r, l, l);  // a fragmentation failure leaves r empty until its next turn
  }
  for (int r = 0; r < kLive; ++r) {
    if (s.holds(r)) s.release(r);
  }
  return int64_t{2} * kOps;
}

// Caching allocator: 256 live blocks of KV-tensor sizes (0.25-16 MiB); each op frees one and
// mallocs one. Operations = mallocs + frees.
int64_t allocator_cycle(CachingAllocator& a, std::mt19937_64& rng) {
  constexpr int kLive = 256, kOps = 200'000;
  std::uniform_int_distribution<int64_t> size(kMiB / 4, 16 * kMiB);
  std::vector<CaBlockId> live(kLive, -1);
  for (auto& b : live) a.malloc(size(rng), &b);
  for (int i = 0; i < kOps; ++i) {
    CaBlockId& b = live[static_cast<size_t>(i % kLive)];
    if (b >= 0) a.free(b);
    b = -1;
    if (!a.malloc(size(rng), &b)) b = -1;
  }
  for (auto b : live) {
    if (b >= 0) a.free(b);
  }
  return int64_t{2} * kOps;
}

// Caching store, concat growth (HF dynamic cache): 64 requests grow token by token; every grow
// reallocates 2L tensors. Operations = tensor mallocs + frees.
int64_t concat_cycle(CachingAllocatorStore& s) {
  constexpr int kReqs = 64, kTokens = 64;
  for (int r = 0; r < kReqs; ++r) s.allocate(r, 128, 128 + kTokens);
  for (int t = 1; t <= kTokens; ++t) {
    for (int r = 0; r < kReqs; ++r) s.grow(r, 128 + t);
  }
  for (int r = 0; r < kReqs; ++r) s.release(r);
  return int64_t{2} * s.tensors_per_request() * kReqs * kTokens;
}

}  // namespace

int main() {
  const ModelSpec& m = Catalog::builtin().model("llama-3-8b");
  {
    PagedStore s(m.kv_bytes_per_token(), {.block_tokens = 16, .num_blocks = 1024 * 64});
    measure("paged", "block 16, 65,536 blocks", "block alloc+free",
            [&] { return paged_cycle(s, false); });
  }
  {
    PagedStore s(m.kv_bytes_per_token(),
                 {.block_tokens = 16, .num_blocks = 1024 * 64, .enable_prefix_caching = true});
    measure("paged", "block 16, prefix caching, 4 shared blocks", "block alloc+free",
            [&] { return paged_cycle(s, true); });
  }
  for (FitPolicy fit : {FitPolicy::kFirst, FitPolicy::kBest}) {
    ContiguousStore s(m.kv_bytes_per_token(), {.arena_bytes = int64_t{80} << 30,
                                               .reserve = ReservePolicy::kPromptPlusMaxNew,
                                               .fit = fit});
    std::mt19937_64 rng(1);
    measure("contiguous", fmt::format("{} fit, 256 live", fit_policy_name(fit)),
            "region alloc+free", [&] { return contiguous_cycle(s, rng); });
  }
  {
    CachingAllocator a(int64_t{60} << 30);
    std::mt19937_64 rng(2);
    measure("caching_allocator", "raw allocator, 0.25-16 MiB, 256 live", "malloc+free",
            [&] { return allocator_cycle(a, rng); });
  }
  {
    CachingAllocatorStore s(
        m, {.growth = GrowthPolicy::kConcat, .device_limit_bytes = int64_t{60} << 30});
    measure("caching_allocator", "store, concat growth, llama-3-8b (64 tensors)",
            "tensor malloc+free", [&] { return concat_cycle(s); });
  }
  return 0;
}
