// What each config.json family reads beyond the keys common to all (hf_config.cc's table names
// which reader an architecture uses; docs/models.md lists the keys).
#pragma once

#include "models/hf_json.h"
#include "models/model_spec.h"

namespace kvsim {

// torch_dtype (or dtype) as vLLM's dtype "auto" takes it: BF16 stays BF16, FP16 and FP32 run as
// FP16; `fallback_reader`'s when `r` has neither (a text_config without its own).
DType hf_dtype(const HfReader& r, const HfReader& fallback_reader);
// Qwen2-MoE and Qwen3-MoE experts, shared expert, decoder_sparse_step and mlp_only_layers.
void read_qwen_moe(const HfReader& r, ModelSpec& m);
// DeepSeek-V2/V3 (and Kimi-K2): MLA and DeepSeekMoE.
void read_deepseek(const HfReader& r, ModelSpec& m);
// quantization_config (read from the top level of the file).
void read_quantization(const HfReader& r, ModelSpec& m);
// gpt-oss: experts with biases, attention sinks, O bias, sliding window on alternate layers.
void read_gpt_oss(const HfReader& r, ModelSpec& m);
// Gemma 3's text model: four norms and q/k norms per layer, five local layers to one global.
void read_gemma3(const HfReader& r, ModelSpec& m);
// Llama 4's text model: routed experts plus one shared, interleaved dense layers, chunked
// attention on the RoPE layers.
void read_llama4(const HfReader& r, ModelSpec& m);
// Phi-3.5-MoE: Mixtral's experts with biases on Q, K, V and O.
void read_phimoe(const HfReader& r, ModelSpec& m);
// Qwen2/Qwen3's windows: layer_types, else use_sliding_window and max_window_layers.
void read_qwen_windows(const HfReader& r, ModelSpec& m);
// Sets the window from the local layers: none, every layer (sliding_window), or some
// (local_attention, a hybrid model).
void set_local_layers(ModelSpec& m, ModelSpec::LocalKind kind, int size,
                      const std::vector<int>& local);

}  // namespace kvsim
