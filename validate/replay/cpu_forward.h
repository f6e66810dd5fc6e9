// The CPU forward pass behind `kvsim-validate replay --backend cpu`: an IterationClock that runs
// each iteration's batch through a Llama-shaped decoder (llama_weights.h) in float32 over a real
// paged KV pool (validate/paged_kv_pool.h) and returns the measured wall time of the whole
// forward pass (docs/validate.md "The replay's CPU forward pass").
//
// One iteration, for the batch's T new tokens packed into one [T, hidden] activation matrix
// (prefill chunks first, then decode tokens, in the batch's order), as vLLM's model runner packs
// them (vllm/v1/worker/gpu_model_runner.py, vllm/model_executor/models/llama.py):
//   embedding lookup of each token (replay_token_id), then per layer: RMSNorm, the fused QKV
//   GEMM, rotary embedding on Q and K (NeoX style, vllm/model_executor/layers/rotary_embedding.py),
//   K and V written into the pool at positions kv_before .. kv_before + new_tokens - 1 through the
//   sequence's block table, attention per sequence over its pool (validate/paged_attention.h),
//   the output GEMM and residual, RMSNorm, the gate_up GEMM, SiLU(gate) * up, the down GEMM and
//   residual; then the final RMSNorm and the LM head GEMM for the rows that emit a token.
// Untimed, before the clock starts: block tables grow to hold the iteration's tokens, and a
// sequence whose kv_before exceeds what the pool holds for it (a swap-in, a prefix-cache hit, a
// request seen again after release) gets the missing positions filled with random K and V.
// Re-running an iteration rewrites the same positions with the same values, so `repeats`
// executions (the clock returns their median) leave the pool as one execution does.
#pragma once

#include <cstdint>
#include <vector>

#include "validate/paged_attention.h"
#include "validate/paged_kv_pool.h"
#include "validate/replay/forward_pass.h"
#include "validate/replay/llama_weights.h"

namespace kvsim::validate {

class CpuForward : public IterationClock {
 public:
  // Throws InputError for a model it cannot run, or a pool or weights over 8 GiB.
  explicit CpuForward(const ForwardSetup& setup);

  double seconds(const ClockBatch& batch) override;
  void release(int64_t request_id) override { pool_.release(request_id); }
  void release_all() override { pool_.release_all(); }

  // Prepares the batch (untimed part) and runs it once; returns the LM head's logits of the
  // emitting rows, [emitting sequences, vocab] row-major, in the batch's order (prefill, then
  // decode).
  std::vector<float> run(const ClockBatch& batch);

  const LlamaWeights& weights() const { return weights_; }
  const PagedKvPool& pool() const { return pool_; }

 private:
  struct SeqRows {
    int64_t id;
    int64_t kv_before;
    int64_t new_tokens;
    bool emits;
    int64_t row0;  // first row in the packed activations
  };
  // The untimed part: rows, block tables, filled-in KV, rope table, buffers.
  void prepare(const ClockBatch& batch);
  // The timed part: the forward pass over the prepared rows; logits land in logits_.
  void forward();
  void fill_missing_kv(int64_t id, int64_t from, int64_t to);
  void rope(float* head, int64_t position) const;

  ForwardSetup setup_;
  LlamaWeights weights_;
  PagedKvPool pool_;
  uint64_t fill_counter_ = 0;
  std::vector<SeqRows> seqs_;
  int64_t tokens_ = 0;
  int64_t emitting_ = 0;
  std::vector<float> cos_, sin_;  // [positions, head_dim / 2]
  // Activations, reused across iterations.
  std::vector<float> x_, h_, qkv_, attn_, proj_, gate_up_, act_, sel_, logits_;
  AttentionScratch scratch_;
};

}  // namespace kvsim::validate
