// The activation peak of one forward pass: what a batch of prefill chunks and decode tokens needs
// beside weights and KV while it runs. Native (eager) attention materialises the B·H·s_q·s_k score
// matrix of a layer, and its softmax beside it; flash attention keeps only per-tile state.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "models/attention_kind.h"

namespace kvsim {

struct ModelSpec;

// One sequence's share of an iteration: `query_tokens` new tokens (a prefill chunk, or 1 for a
// decode step) attending to `context_tokens` tokens (including the new ones).
struct BatchChunk {
  int64_t query_tokens = 0;
  int64_t context_tokens = 0;
};

// Bytes of one layer's attention scores for the chunks: sum of H x s_q x s_k x bytes(weight
// dtype). 68,719,476,736 for one 32k prompt with 32 heads in FP16.
int64_t attention_score_bytes(const ModelSpec& model, std::span<const BatchChunk> chunks);

// Peak activation bytes of one forward pass (layers run one after another, so one layer's
// transients plus the hidden state and last-token logits):
//   hidden state, residual, norm output, attention output: 4 x T x hidden
//   Q, K, V projections:                                   T x (H + 2 H_kv) x D
//   MLP (gate, up, activation):                            3 x T x ffn x experts_per_token
//   native: scores and their softmax, 2 x attention_score_bytes; flash: T x H x 4 (softmax LSE)
//   logits of the last token of each sequence in FP32:     B x vocab x 4
// all x bytes(weight dtype) except where FP32 is said (16-bit when the weights are
// quantized). T = sum of query tokens, B = chunks.
// Throws InputError on 64-bit overflow.
int64_t activation_peak_bytes(const ModelSpec& model, std::span<const BatchChunk> chunks,
                              AttentionKind attention);

// The same for `chunks` plus `decode_seqs` decode steps (one query token each) whose contexts
// sum to `decode_context_tokens`: every term is a sum over chunks of query tokens or of query x
// context tokens, so the decode steps enter through their count and context sum alone and the
// result equals the per-chunk form exactly (the engine's hot path; no chunk per sequence).
int64_t activation_peak_bytes(const ModelSpec& model, std::span<const BatchChunk> chunks,
                              int64_t decode_seqs, int64_t decode_context_tokens,
                              AttentionKind attention);

// The activation peak vLLM's profile run measures: a dummy batch of `max_batched_tokens` tokens
// split into min(max_num_seqs, max_batched_tokens) equal prefills (no prior context).
int64_t profile_activation_peak_bytes(const ModelSpec& model, int64_t max_batched_tokens,
                                      int64_t max_num_seqs, AttentionKind attention);

}  // namespace kvsim
