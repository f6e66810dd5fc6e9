// The precise prefix-aware router (`cluster.router: {type: precise_prefix}`): llm-d's precise
// prefix-cache scorer in kvsim. It keeps, per replica and tier, the set of block keys the
// replica's engine reported stored and not yet removed (KV events, models/memory/kv_events.h;
// llm-d-kv-cache: pkg/kvcache/kvevents feeds pkg/kvcache/kvblock's index), and scores a request
// on each replica as LongestPrefixScorer.Score does (pkg/kvcache/kvblock_scorer.go): walking the
// prompt's blocks from the first, a replica scores the weight of the best tier holding the block
// (GPU gpu_weight, CPU cpu_weight, disk disk_weight; llm-d's default backend weights are gpu 1.0
// and cpu 0.8) and drops out at the first block it holds in no tier. The unit is the replica's GPU
// block; a CPU or disk block covers the GPU blocks inside it. The highest score wins; equal
// scores (a prompt nobody holds) go to the replica with the fewest outstanding requests, then the
// lowest index: the load-aware tie-break.
// Events reach the router at once (llm-d's arrive over ZMQ within milliseconds); a replica's
// index survives its crash, as its prefix cache does in kvsim.
#include <array>
#include <unordered_set>
#include <vector>

#include "models/memory/block_keys.h"
#include "models/memory/offload/offload_tier.h"
#include "sim/cluster/router.h"

namespace kvsim {

namespace {

// What the router knows of one replica's tier: the keys it holds and its block size.
struct PrecisePrefixTier {
  std::unordered_set<uint64_t> keys;
  int64_t block_tokens = 0;  // from its events; 0 until the first
};

class PrecisePrefixRouter final : public Router {
 public:
  explicit PrecisePrefixRouter(std::array<double, kKvMediums> weights) : weights_(weights) {}

  bool wants_kv_events() const override { return true; }

  void on_kv_event(int replica, const KvBlockEvent& e) override {
    if (replica >= static_cast<int>(replicas_.size())) replicas_.resize(replica + 1);
    PrecisePrefixTier& t = replicas_[replica][static_cast<size_t>(e.medium)];
    t.block_tokens = e.block_tokens;
    if (e.removed) {
      t.keys.erase(e.key);
    } else {
      t.keys.insert(e.key);
    }
  }

  int route(const RequestSpec& spec, std::span<const ReplicaView> replicas) override {
    int best = -1;
    double best_score = 0;
    for (int i = 0; i < static_cast<int>(replicas.size()); ++i) {
      if (!replicas[i].up) continue;
      const double s = score(spec, i);
      if (best < 0 || s > best_score ||
          (s == best_score && replicas[i].outstanding < replicas[best].outstanding)) {
        best = i;
        best_score = s;
      }
    }
    return best;
  }

 private:
  // Whether `tier` holds the block of its own size that covers GPU block i (of `gpu_tokens`).
  static bool holds(const PrecisePrefixTier& tier, const PrefixHashes& prefix, KvMedium medium,
                    int64_t i, int64_t gpu_tokens) {
    const int64_t t = tier.block_tokens;
    if (t <= 0 || tier.keys.empty()) return false;
    const int64_t j = i * gpu_tokens / t;
    // The GPU block must lie inside tier block j, and j inside the prompt's hashes.
    if ((i + 1) * gpu_tokens > (j + 1) * t) return false;
    if (j >= keyable_prefix_blocks(prefix, prefix.prompt_tokens, t)) return false;
    const uint64_t key = medium == KvMedium::kGpu
                             ? hashed_block_key(prefix, j, t)
                             : offload_block_key(prefix.hashes, prefix.block_tokens, j, t);
    return tier.keys.count(key) != 0;
  }

  // The weighted length (tokens) of the prompt's prefix that replica `r` holds.
  double score(const RequestSpec& spec, int r) const {
    if (r >= static_cast<int>(replicas_.size())) return 0;
    const auto& tiers = replicas_[r];
    const int64_t g = tiers[static_cast<size_t>(KvMedium::kGpu)].block_tokens > 0
                          ? tiers[static_cast<size_t>(KvMedium::kGpu)].block_tokens
                          : 16;
    const PrefixHashes prefix{.hashes = spec.prefix_hashes,
                              .block_tokens = spec.hash_block_tokens,
                              .prompt_tokens = spec.prompt_tokens};
    const int64_t n = keyable_prefix_blocks(prefix, spec.prompt_tokens, g);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      double w = -1;  // the best weight of a tier holding block i; -1: none holds it
      for (int m = 0; m < kKvMediums; ++m) {
        if (weights_[m] > w && holds(tiers[m], prefix, static_cast<KvMedium>(m), i, g)) {
          w = weights_[m];
        }
      }
      if (w < 0) break;
      total += w * static_cast<double>(g);
    }
    return total;
  }

  std::array<double, kKvMediums> weights_;
  std::vector<std::array<PrecisePrefixTier, kKvMediums>> replicas_;
};

}  // namespace

std::unique_ptr<Router> make_precise_prefix_router(const ConfigNode& node, const RouterContext&) {
  const std::array<double, kKvMediums> w = {
      node.get<double>("gpu_weight", 1.0, {.min = 0.001, .max = 1e6}),
      node.get<double>("cpu_weight", 0.8, {.min = 0, .max = 1e6}),
      node.get<double>("disk_weight", 0.5, {.min = 0, .max = 1e6})};
  return std::make_unique<PrecisePrefixRouter>(w);
}

}  // namespace kvsim
