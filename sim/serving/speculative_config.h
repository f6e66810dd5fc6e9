// Speculative decoding's settings: the engine's `speculative_config:` (vLLM's
// --speculative-config, the same key names), and the deterministic acceptance draw that stands in
// for the target model's verification. How the engine schedules and times it:
// sim/serving/speculative.h; docs/models.md "Speculative decoding".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.h"

namespace kvsim {

class ConfigNode;

struct SpeculativeConfig {
  // vLLM's SpeculativeConfig.method. eagle, eagle3 and mtp draft with one extra layer run k times
  // (vLLM's EagleProposer for all three); ngram matches the context on the CPU, ngram_gpu the
  // same on the GPU (both modelled as costing no GPU time; they differ in async scheduling,
  // async_by_default); draft_model runs
  // a separate small model k times (vLLM's DraftModelProposer), its weights and KV beside the
  // target's.
  enum class Method { kEagle, kEagle3, kMtp, kNgram, kNgramGpu, kDraftModel };
  Method method = Method::kEagle;
  std::string method_name = "eagle";
  int num_speculative_tokens = 1;  // k: drafts proposed per decode step
  // The chance that draft position i (1-based) is accepted, as vLLM's spec-decode metrics report
  // it ("Per-position acceptance rate": accepted at position i / drafts). Non-increasing, one
  // entry per position: position i can only be accepted when i-1 was.
  std::vector<double> acceptance_per_position;
  uint64_t seed = 0;  // the acceptance draws' seed (never the wall clock)
  // draft_model only: the draft model as `model:` names it (a catalog name or a model file,
  // resolved as the scenario's top-level `model:`), and its spec once the scenario's setup has
  // resolved it (with the engine's weights_dtype / kv_cache_dtype, as for the target).
  std::string draft_model_name;
  std::optional<ModelSpec> draft_model;
  std::optional<int> draft_tensor_parallel;  // as written; only the target's degree is modelled

  // vLLM's Scheduler.num_lookahead_tokens: k for EAGLE-style drafters (use_eagle(): their next
  // drafts' KV is written in the same step) and for a draft model (uses_draft_model(): its k
  // passes write the draft model's KV of the drafts), 0 for ngram.
  int64_t lookahead_tokens() const {
    return method == Method::kNgram || method == Method::kNgramGpu ? 0 : num_speculative_tokens;
  }
  // Whether the draft runs on the GPU with one extra decoder layer (EAGLE, EAGLE-3, MTP).
  bool one_layer_drafter() const {
    return method == Method::kEagle || method == Method::kEagle3 || method == Method::kMtp;
  }
  // Whether vLLM turns an unset async_scheduling on with this method: only for its
  // EagleModelTypes (eagle, eagle3, the MTP types) and NgramGPUTypes (ngram_gpu), not for the
  // CPU `ngram` nor `draft_model` (VllmConfig.__post_init__, the `async_scheduling is None`
  // branch).
  bool async_by_default() const { return one_layer_drafter() || method == Method::kNgramGpu; }
  // Whether vLLM accepts async_scheduling: true with it: EAGLE-style methods and draft_model;
  // the CPU `ngram` raises "Currently, async scheduling is only supported with EAGLE/MTP/Draft
  // Model/NGram GPU kind of speculative decoding".
  bool async_allowed() const { return method != Method::kNgram; }
};

// Reads `speculative_config:` (a map); nullopt when absent or null. Throws ConfigError at the
// offending key.
std::optional<SpeculativeConfig> parse_speculative_config(const ConfigNode& engine);

// Draft tokens accepted out of `drafts` (<= k) for request `request_id` at its decode step
// `step`: one uniform draw u from (seed, request, step) by SplitMix64, and the accepted prefix is
// the positions i with u < acceptance_per_position[i-1]. The rates being non-increasing, position
// i is then accepted with exactly its rate, and only after i-1. Same inputs, same result.
// `request_rate` (the request's own `acceptance_rate` trace column) replaces the rates with
// request_rate^i.
int64_t accepted_drafts(const SpeculativeConfig& c, int64_t request_id, int64_t step,
                        int64_t drafts, std::optional<double> request_rate = std::nullopt);

}  // namespace kvsim
