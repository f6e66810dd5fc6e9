// How a model is split over GPUs (tensor and pipeline parallelism, as vLLM shards it) and what
// one GPU then holds: its weight bytes, its KV bytes per token, and the model as that GPU sees it.
// See docs/memory.md "Parallelism and quantization" for the vLLM code each rule follows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model_spec.h"

namespace kvsim {

struct Parallelism {
  int tensor = 1;    // t: GPUs that split every layer (vLLM --tensor-parallel-size)
  int pipeline = 1;  // p: stages that split the layers (vLLM --pipeline-parallel-size)
  int gpus() const { return tensor * pipeline; }
  bool single() const { return tensor == 1 && pipeline == 1; }
};

// vLLM pads the vocabulary to a multiple of 64 before splitting it (VocabParallelEmbedding,
// ParallelLMHead); kvsim pads only when t > 1, so single-GPU figures keep the checkpoint's count.
inline constexpr int64_t kVocabPadding = 64;
// AWQ's group: one 16-bit scale and one packed 4-bit zero per 128 input rows of a column.
inline constexpr int64_t kInt4GroupSize = 128;

// Throws InputError naming the reason when `model` cannot be split this way: query heads,
// KV heads (divisible by t, or dividing t when fewer: then replicated) and the MLP width must
// split evenly, and every stage needs a layer.
void check_parallelism(const ModelSpec& model, Parallelism par);

// KV heads one GPU holds: H_kv / t, or 1 replica when H_kv < t (vLLM get_num_kv_heads).
int kv_heads_per_gpu(const ModelSpec& model, int tensor);
// Vocabulary rows one GPU holds of the embedding and of the LM head.
int64_t vocab_per_gpu(const ModelSpec& model, int tensor);
// Layers of each stage, first to last (vLLM get_pp_indices: L / p each, the remainder one
// each to the stages before the last, counted back from the second-to-last).
std::vector<int> stage_layers(int layers, int pipeline);

// Bytes of weights on one GPU of `stage`: the decoder layers of the stage split t ways, the
// embedding on the first stage, the final norm and the LM head on the last (a tied LM head is
// a second copy when the two stages differ). Linear weights at bits(weight_dtype) with their
// quantization scales; embeddings, LM head, norms, biases and the router at 16 bits. A
// weights_gb override is split evenly over the GPUs, rounded up.
int64_t weights_bytes_on_gpu(const ModelSpec& model, Parallelism par, int stage);
// 2 x (layers of the stage) x kv_heads_per_gpu x D x bytes(kv_dtype).
int64_t kv_bytes_per_token_on_gpu(const ModelSpec& model, Parallelism par, int stage);

// The model as one GPU of `stage` holds it: heads / t, kv_heads_per_gpu, ffn / t, the vocab
// share, the stage's layers and its weight bytes (as weights_bytes_override), so everything that
// sizes memory from a ModelSpec (the pool, the KV stores, activations) works per GPU. Returns
// `model` itself when par is single.
ModelSpec gpu_share(const ModelSpec& model, Parallelism par, int stage);

// "TP 4 x PP 2 (8 GPUs)", for messages.
std::string parallelism_text(Parallelism par);

}  // namespace kvsim
