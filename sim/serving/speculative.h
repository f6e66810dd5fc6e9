// Speculative decoding in the engine's iterations, as vLLM V1 runs it (docs/models.md
// "Speculative decoding"): a decode schedules its last sampled token and k drafts (RunQueues::
// grow_decodes, with the KV slots and lookahead), the target model verifies the 1+k query tokens
// of each sequence in one pass, the drafter proposes the next drafts in the same step, and the
// step's accepted drafts (accepted_drafts) add to the one token every decode gains.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "models/latency/latency_model.h"
#include "models/memory/activation.h"
#include "models/parallelism.h"
#include "sim/metrics/recorder.h"
#include "sim/request/request_state.h"
#include "sim/serving/scheduler.h"
#include "sim/serving/speculative_config.h"

namespace kvsim {

// The model as the memory pool holds it with the drafter loaded: EAGLE, EAGLE-3 and MTP add one
// decoder layer (its weights, and its KV in the same pool: vLLM's KV cache spec takes every
// attention layer of the forward context, the drafter's included, so the pool's blocks are
// shared by L + 1 layers). The extra layer is global (full attention) and dense for EAGLE (an
// EAGLE head is a Llama layer), MoE for MTP. ngram adds nothing, nor does a pipeline-parallel
// engine (the drafter runs on the last stage only: not modelled). The fc / eh_proj projection
// and EAGLE-3's own draft-vocabulary LM head are left out.
ModelSpec model_with_drafter(const ModelSpec& target, const SpeculativeConfig& config,
                             const Parallelism& par);
// draft_model's share of model_with_drafter: the target with the draft model's weights added (each
// GPU's share of it under `par`, as vLLM shards the draft model with the target's tensor
// parallelism) and its KV bytes per token as extra target layers (its KV bytes divided by one
// target layer's, rounded up: exact when they divide, as for llama-3-8b's 32 layers beside
// llama-3-70b, both 8 KV heads of 128), so the pool's blocks hold both models' layers.
ModelSpec model_with_draft_model(const ModelSpec& target, const ModelSpec& draft,
                                 const Parallelism& par);

class Speculator {
 public:
  // `target` is the replica's latency model (borrowed only while constructing): the drafter's is
  // built from its model, GPU, profile and parallelism.
  Speculator(const SpeculativeConfig& config, const LatencyModel& target);

  const SpeculativeConfig& config() const { return config_; }

  // The plan's decodes as the target model sees them: each one with d > 0 drafts is a query of
  // 1 + d tokens over its KV (a PrefillChunk that emits, and a BatchChunk for the activations),
  // appended to `shape.prefill` and `chunks`; the ones without drafts stay decodes, their count
  // and attended context set in shape.decode_seqs / decode_context_tokens.
  void verification_shape(const IterationPlan& it, const ModelSpec& model, BatchShape& shape,
                          std::vector<BatchChunk>& chunks) const;

  // The drafter's seconds in a step whose target pass is `shape` (verification_shape's):
  // EAGLE/EAGLE-3/MTP run their one layer, draft_model its whole draft model, over every token
  // of the step, then k - 1 more times over one row per sequence that samples (vLLM's
  // EagleProposer.propose, which DraftModelProposer inherits); ngram costs no GPU time. Only the
  // passes' GPU time: the step's fixed overhead is the target pass's.
  double draft_seconds(const BatchShape& shape) const;

  // The end of a step for the decode `r` that ran with r.spec_drafts drafts: how many tokens it
  // gains (1 + the accepted drafts, at most what its output has left, as vLLM stops a request at
  // max_tokens inside a step's tokens), with the drafts and their acceptance told to `recorder`.
  // Also r's spec_last_gain / spec_last_drafts (what async scheduling's next plan reads).
  int64_t tokens_gained(RequestState& r, Recorder& recorder);
  // The end of a step whose prefill gave `r` its first token: its spec_last_gain is 1.
  void prefill_gained(RequestState& r);
  // At a step's end, before its gains: the requests that gained in the step before gained
  // nothing in this one unless it says so again (their spec_last_gain back to 0).
  void begin_step_end(std::unordered_map<int64_t, RequestState>& requests);

 private:
  SpeculativeConfig config_;
  std::unique_ptr<LatencyModel> draft_;  // the one-layer drafter or draft model; nullptr: ngram
  std::vector<int64_t> gained_;          // the requests whose spec_last_gain is set
};

}  // namespace kvsim
