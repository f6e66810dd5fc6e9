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
  // d: engine replicas whose attention runs apart, each on its own batch, and whose MoE layers
  // share their experts (vLLM --data-parallel-size). Figures are for one of them: its GPUs hold
  // t x p of the whole, as without it, except the routed experts, which are split over all
  // d x t GPUs of a stage (vLLM FusedMoEParallelConfig.make, flatten_tp_across_dp).
  int data = 1;
  // Expert parallelism (vLLM --enable-expert-parallel): each of the d x t GPUs holds whole
  // experts, E / (d x t) of them, instead of a 1 / (d x t) slice of every expert; tokens go to
  // their experts' GPUs and back by all-to-all (docs/models.md "Expert parallelism").
  bool expert = false;
  // GPUs of one engine replica (what a scenario replica's figures are per); d replicas use d x
  // this.
  int gpus() const { return tensor * pipeline; }
  bool single() const { return tensor == 1 && pipeline == 1 && data == 1 && !expert; }
  // The GPUs the routed experts of one layer are split over: d x t.
  int expert_group() const { return data * tensor; }
};

// vLLM pads the vocabulary to a multiple of 64 before splitting it (VocabParallelEmbedding,
// ParallelLMHead); kvsim pads only when t > 1, so single-GPU figures keep the checkpoint's count.
inline constexpr int64_t kVocabPadding = 64;
// AWQ's group: one 16-bit scale and one packed 4-bit zero per 128 input rows of a column.
inline constexpr int64_t kInt4GroupSize = 128;
// MXFP4 (OCP Microscaling): one E8M0 scale per 32 elements; NVFP4: one FP8 scale per 16.
inline constexpr int64_t kMxfp4Group = 32;
inline constexpr int64_t kNvfp4Group = 16;

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

// Routed experts one GPU holds whole (expert parallelism: ceil(E / (d x t)), the heaviest rank's
// share as vLLM determine_expert_map hands the remainder to the first ranks), or every expert
// (each as a 1 / (d x t) slice) without it.
int local_experts(const ModelSpec& model, Parallelism par);
// The MLP width of one routed expert on one GPU: whole under expert parallelism, else / (d x t).
int64_t routed_ffn_per_gpu(const ModelSpec& model, Parallelism par);

// Bytes of weights on one GPU of `stage`: the decoder layers of the stage split t ways, the
// embedding on the first stage, the final norm and the LM head on the last (a tied LM head is
// a second copy when the two stages differ). Linear weights at bits(weight_dtype) with their
// quantization scales; embeddings, LM head, norms, biases and the router at 16 bits. MoE layers
// hold the router, the shared experts split t ways and the routed experts as local_experts x
// routed_ffn_per_gpu. A weights_gb override is split evenly over the GPUs, rounded up.
int64_t weights_bytes_on_gpu(const ModelSpec& model, Parallelism par, int stage);
// (layers of the stage) x kv_elements_per_layer(kv_heads_per_gpu) x bytes(kv_dtype): MLA's
// latent is whole on every GPU (vLLM keeps one latent "head", replicated over TP ranks).
int64_t kv_bytes_per_token_on_gpu(const ModelSpec& model, Parallelism par, int stage);

// The model as one GPU of `stage` holds it: heads / t, kv_heads_per_gpu, ffn / t, the vocab
// share, the stage's layers and its weight bytes (as weights_bytes_override), so everything that
// sizes memory from a ModelSpec (the pool, the KV stores, activations) works per GPU. Returns
// `model` itself when par is single.
ModelSpec gpu_share(const ModelSpec& model, Parallelism par, int stage);

// "TP 4 x PP 2 (8 GPUs)", for messages; "DP 8 x EP (8 GPUs)" style parts when set.
std::string parallelism_text(Parallelism par);

}  // namespace kvsim
