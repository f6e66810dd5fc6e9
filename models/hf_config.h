// A model from a Hugging Face config.json: the architectures kvsim can model and the keys each
// reads, registered in one table (hf_config.cc, hf_architectures()), so `model:` in a scenario and
// `--model` on the command line take any such file (docs/models.md lists what is read).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "models/model_spec.h"

namespace kvsim {

// Reads `file` (a config.json). Throws InputError, one line naming the file and, where the
// problem sits in it, line:col: malformed JSON, an architecture kvsim cannot model (the
// message lists the supported ones), a missing or mistyped key.
ModelSpec read_hf_config(const std::filesystem::path& file);
// The same from the file's text; `source` names it in messages and in ModelSpec::source.
ModelSpec parse_hf_config(const std::string& text, const std::string& source);
// Why `file` cannot be read as a model file ("" when it is a regular file): missing, a folder (and
// whether a config.json is inside), a symbolic link loop, a FIFO, a device, a socket. Each is
// named as what it is: "no such file" for a folder sends the user looking for the wrong thing,
// and a FIFO or /dev/zero would block or never end. `what` names the file expected, e.g. "a
// Hugging Face config.json".
std::string model_file_problem(const std::filesystem::path& file, const std::string& what);

// Keys an architecture reads beyond the common ones and its row's switches.
enum class HfExtra {
  kNone,
  kQwenMoe,      // num_experts, moe_intermediate_size, decoder_sparse_step, mlp_only_layers,
                 // shared_expert_intermediate_size (Qwen2-MoE, Qwen3-MoE)
  kDeepseekMla,  // MLA (kv_lora_rank, q_lora_rank, qk_*_head_dim, v_head_dim) and DeepSeekMoE
                 // (n_routed_experts, n_shared_experts, moe_intermediate_size,
                 // first_k_dense_replace, moe_layer_freq, num_nextn_predict_layers)
  kGptOss,       // sliding_window on alternate layers (layer_types), sinks, biases
  kGemma3,       // sliding_window, sliding_window_pattern (layer_types), four norms per layer
  kLlama4,       // intermediate_size_mlp, interleave_moe_layer_step, attention_chunk_size,
                 // no_rope_layers (no_rope_layer_interval); one shared expert
  kPhiMoe,       // attention_bias on Q, K, V and O
};

// One supported `architectures` entry and what kvsim makes of it.
struct HfArchitecture {
  const char* name;      // e.g. "LlamaForCausalLM"
  const char* family;    // e.g. "Llama"
  bool grouped_kv;       // reads num_key_value_heads (else every head has its own K and V)
  bool qkv_bias;         // Q, K and V carry biases (Qwen2)
  bool gated_mlp;        // gate, up and down (SwiGLU); else up and down (GELU)
  bool experts;          // reads num_local_experts and num_experts_per_tok (Mixtral)
  bool window_switch;    // sliding_window counts only when use_sliding_window is true (Qwen2)
  bool window;           // reads sliding_window at all
  bool qk_norm = false;  // per-head RMSNorm on Q and K (Qwen3)
  HfExtra extra = HfExtra::kNone;
  bool text_config = false;  // the language model's keys sit in text_config (multimodal classes)
};
const std::vector<HfArchitecture>& hf_architectures();

}  // namespace kvsim
