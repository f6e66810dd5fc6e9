#include "models/hf_families.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "core/echo_text.h"

namespace kvsim {

// torch_dtype as vLLM's dtype "auto" takes it: BF16 stays BF16, FP16 and FP32 run as FP16.
DType hf_dtype(const HfReader& own, const HfReader& fallback_reader) {
  const HfReader& r = own.has("torch_dtype") || own.has("dtype") ? own : fallback_reader;
  const std::string key = r.has("torch_dtype") ? "torch_dtype" : "dtype";  // newer transformers
  const std::string t = r.string(key, "float16");
  if (t == "bfloat16") return DType::kBf16;
  if (t == "float16" || t == "float32") return DType::kFp16;
  r.fail(key,
         fmt::format("'{}': expected bfloat16, float16 or float32, got \"{}\"", key, echo_text(t)));
}

// Qwen2-MoE and Qwen3-MoE (vLLM qwen2_moe.py / qwen3_moe.py, the decoder layer's choice of MLP):
// layer i holds the experts unless it is in mlp_only_layers, when num_experts > 0 and
// (i + 1) % decoder_sparse_step == 0; else a dense MLP of intermediate_size. Qwen2-MoE adds one
// shared expert of shared_expert_intermediate_size.
void read_qwen_moe(const HfReader& r, ModelSpec& m) {
  const int experts = static_cast<int>(r.integer("num_experts", 0, 0, 4096));
  if (experts <= 1) return;  // a dense model in MoE clothing
  m.num_experts = experts;
  m.experts_per_token = static_cast<int>(r.integer("num_experts_per_tok", 1, experts));
  m.expert_ffn = static_cast<int>(r.integer("moe_intermediate_size", 1, 1 << 22));
  m.shared_expert_ffn =
      static_cast<int>(r.integer("shared_expert_intermediate_size", 0, 0, 1 << 22));
  const int64_t step = r.integer("decoder_sparse_step", 1, 1, m.layers);
  const std::vector<int64_t> only = r.int_list("mlp_only_layers", m.layers - 1);
  for (int i = 0; i < m.layers; ++i) {
    const bool dense = std::find(only.begin(), only.end(), i) != only.end() || (i + 1) % step != 0;
    if (dense) m.dense_layers.push_back(i);
  }
}

// DeepSeek-V2/V3 and Kimi-K2 (vLLM deepseek_v2.py: DeepseekV2DecoderLayer, DeepseekV2MoE,
// DeepseekV2MLAAttention). MLA: the query/key head is qk_nope_head_dim + qk_rope_head_dim, one
// latent KV "head". MoE: layer i holds the experts when n_routed_experts is set,
// i >= first_k_dense_replace and i % moe_layer_freq == 0; its shared experts are one MLP of
// n_shared_experts x moe_intermediate_size.
void read_deepseek(const HfReader& r, ModelSpec& m) {
  m.kv_lora_rank = static_cast<int>(r.integer("kv_lora_rank", 1, 1 << 16));
  m.q_lora_rank = static_cast<int>(r.integer("q_lora_rank", 0, 0, 1 << 16));
  m.qk_rope_head_dim = static_cast<int>(r.integer("qk_rope_head_dim", 0, 4096));
  const int nope = static_cast<int>(r.integer("qk_nope_head_dim", 1, 4096));
  m.head_dim = nope + m.qk_rope_head_dim;
  m.v_head_dim = static_cast<int>(r.integer("v_head_dim", 1, 4096));
  m.kv_heads = 1;
  m.mtp_layers = static_cast<int>(r.integer("num_nextn_predict_layers", 0, 0, 16));
  const int experts = static_cast<int>(r.integer("n_routed_experts", 0, 0, 4096));
  if (experts <= 1) return;
  m.num_experts = experts;
  m.experts_per_token = static_cast<int>(r.integer("num_experts_per_tok", 1, experts));
  m.expert_ffn = static_cast<int>(r.integer("moe_intermediate_size", 1, 1 << 22));
  m.shared_expert_ffn = static_cast<int>(r.integer("n_shared_experts", 0, 0, 64)) * m.expert_ffn;
  const int64_t first_dense = r.integer("first_k_dense_replace", 0, 0, m.layers);
  const int64_t freq = r.integer("moe_layer_freq", 1, 1, m.layers);
  for (int i = 0; i < m.layers; ++i) {
    if (i < first_dense || i % freq != 0) m.dense_layers.push_back(i);
  }
}

// quantization_config, as vLLM picks a quantization method from its quant_method
// (vllm/model_executor/layers/quantization/: Fp8Config.from_config reads weight_block_size,
// Mxfp4Config, ModelOptNvFp4Config's quant_algo, AWQConfig and GPTQConfig's bits and
// group_size). A method kvsim cannot model is an error naming it.
void read_quantization(const HfReader& r, ModelSpec& m) {
  if (!r.has("quantization_config")) return;
  const HfJson& q = r.json().at("quantization_config");
  const std::string key = "quant_method";
  if (!q.is_object() || !q.contains(key) || !q.at(key).is_string()) {
    r.fail("quantization_config", "'quantization_config': expected an object with a quant_method");
  }
  std::string method = q.at(key).get<std::string>();
  std::transform(method.begin(), method.end(), method.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto integer = [&](const char* k, int64_t fallback) -> int64_t {
    if (!q.contains(k) || q.at(k).is_null()) return fallback;
    if (!q.at(k).is_number_integer()) {
      r.fail(k, fmt::format("'{}': expected an integer, got {}", k, q.at(k).dump()));
    }
    return q.at(k).get<int64_t>();
  };
  if (method == "fp8") {
    m.weight_dtype = DType::kFp8;
    if (q.contains("weight_block_size") && !q.at("weight_block_size").is_null()) {
      const HfJson& b = q.at("weight_block_size");
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || b[0] != b[1] ||
          b[0].get<int64_t>() < 1 || b[0].get<int64_t>() > 4096) {
        r.fail("weight_block_size", fmt::format("'weight_block_size': expected a square block "
                                                "[b, b] with 1 <= b <= 4096, got {}",
                                                b.dump()));
      }
      m.weight_group = static_cast<int>(b[0].get<int64_t>());
    }
  } else if (method == "mxfp4") {
    // gpt-oss: only the experts are MXFP4 (modules_to_not_convert lists attention, router,
    // embedding and LM head); a dense model's linear layers all.
    if (m.moe()) {
      m.expert_weight_dtype = DType::kMxfp4;
    } else {
      m.weight_dtype = DType::kMxfp4;
    }
  } else if (method == "modelopt") {
    // Read as a key of its own, so a non-string is named at its place, not at the file's start.
    const std::string algo = HfReader(q, r.text(), r.source()).string("quant_algo", "");
    if (algo == "FP8") {
      m.weight_dtype = DType::kFp8;
    } else if (algo == "NVFP4") {
      m.weight_dtype = DType::kNvfp4;
    } else {
      r.fail("quant_algo", fmt::format("modelopt quant_algo \"{}\" is not one kvsim models "
                                       "(FP8, NVFP4)",
                                       echo_text(algo)));
    }
  } else if (method == "awq" || method == "gptq") {
    const int64_t bits = integer(method == "awq" ? "bits" : "bits", 4);
    if (bits != 4) {
      r.fail("bits", fmt::format("{} with {} bits is not modelled (4-bit only)", method, bits));
    }
    m.weight_dtype = DType::kInt4;
    const int64_t group = integer("group_size", 128);
    // -1: one group per column (a scale per output channel).
    m.weight_group = group < 0 ? 1 << 30 : static_cast<int>(std::min<int64_t>(group, 1 << 30));
    if (group == 0) r.fail("group_size", "'group_size': expected -1 or a positive integer");
  } else {
    r.fail(key, fmt::format("quant_method \"{}\" is not one kvsim models (fp8, mxfp4, "
                            "modelopt FP8/NVFP4, awq, gptq)",
                            echo_text(method)));
  }
}

namespace {

// The layers `layer_types` marks `local_name` (transformers' per-layer list, which vLLM's model
// files read where present), or nullopt when the config has no layer_types.
std::optional<std::vector<int>> hf_layer_types(const HfReader& r, const ModelSpec& m,
                                               const std::string& local_name) {
  if (!r.has("layer_types")) return std::nullopt;
  const std::vector<std::string> types = r.string_list("layer_types");
  if (static_cast<int>(types.size()) != m.layers) {
    r.fail("layer_types", fmt::format("'layer_types': expected {} entries (num_hidden_layers), "
                                      "got {}",
                                      m.layers, types.size()));
  }
  std::vector<int> local;
  for (int i = 0; i < m.layers; ++i) {
    const std::string& t = types[static_cast<size_t>(i)];
    if (t == local_name) {
      local.push_back(i);
    } else if (t != "full_attention") {
      r.fail("layer_types", fmt::format("'layer_types'[{}]: expected \"{}\" or \"full_attention\", "
                                        "got \"{}\"",
                                        i, local_name, echo_text(t)));
    }
  }
  return local;
}

// Layers i with (i + 1) % every != 0: Gemma 3's sliding_window_pattern, Llama 4's
// no_rope_layer_interval (its global layers are the NoPE ones).
std::vector<int> all_but_every(int layers, int64_t every) {
  std::vector<int> local;
  for (int i = 0; i < layers; ++i) {
    if ((i + 1) % every != 0) local.push_back(i);
  }
  return local;
}

}  // namespace

void set_local_layers(ModelSpec& m, ModelSpec::LocalKind kind, int size,
                      const std::vector<int>& local) {
  if (local.empty()) return;
  if (kind == ModelSpec::LocalKind::kSlidingWindow && static_cast<int>(local.size()) == m.layers) {
    m.sliding_window = size;  // every layer: the uniform window the paged store frees blocks for
    return;
  }
  m.local_attention = ModelSpec::LocalAttention{kind, size, local};
}

// vLLM gpt_oss.py: OAIAttention's QKVParallelLinear and o_proj take their default bias=True,
// and `sinks` (one per head); the sliding window applies to layers with layer_idx % 2 == 0
// (layer_types where the config has them). MLPBlock: a router with bias over
// num_local_experts experts of width intermediate_size, with w13_bias and w2_bias, in every layer.
void read_gpt_oss(const HfReader& r, ModelSpec& m) {
  m.qkv_bias = m.o_bias = true;
  m.attention_sinks = true;
  m.expert_bias = true;
  m.expert_ffn = m.ffn;
  const int window = static_cast<int>(r.integer("sliding_window", 1, 1 << 30));
  std::vector<int> local;
  if (auto typed = hf_layer_types(r, m, "sliding_attention")) {
    local = *typed;
  } else {
    for (int i = 0; i < m.layers; i += 2) local.push_back(i);
  }
  set_local_layers(m, ModelSpec::LocalKind::kSlidingWindow, window, local);
}

// vLLM gemma3.py: Gemma3DecoderLayer has four GemmaRMSNorms (input, post_attention,
// pre_feedforward, post_feedforward), Gemma3Attention a q_norm and k_norm of head_dim and biases
// on qkv_proj and o_proj when attention_bias; layer i is local (sliding_window) when
// (layer_idx + 1) % sliding_window_pattern != 0, or as layer_types says. Embeddings are tied
// unless the config says otherwise (Gemma3TextConfig's default).
void read_gemma3(const HfReader& r, ModelSpec& m) {
  m.layer_norms = 4;
  m.o_bias = m.qkv_bias;
  m.tied_embeddings = r.boolean("tie_word_embeddings", true);
  const int window = static_cast<int>(r.integer("sliding_window", 4096, 1, 1 << 30));
  std::vector<int> local;
  if (auto typed = hf_layer_types(r, m, "sliding_attention")) {
    local = *typed;
  } else {
    local = all_but_every(m.layers, r.integer("sliding_window_pattern", 6, 1, m.layers + 1));
  }
  set_local_layers(m, ModelSpec::LocalKind::kSlidingWindow, window, local);
}

// vLLM llama4.py: Llama4MoE (a router over num_local_experts experts of width intermediate_size
// and one shared_expert of the same width) in layers with (layer_idx + 1) %
// interleave_moe_layer_step == 0, else a LlamaMLP of intermediate_size_mlp. Llama4Attention uses
// iRoPE's chunked local attention (attention_chunk_size) on the RoPE layers: no_rope_layers[i]
// == 1, by default all but every no_rope_layer_interval-th (transformers' Llama4TextConfig).
void read_llama4(const HfReader& r, ModelSpec& m) {
  m.expert_ffn = m.ffn;
  m.shared_expert_ffn = m.ffn;
  m.ffn = static_cast<int>(r.integer("intermediate_size_mlp", m.ffn, 1, 1 << 22));
  const int64_t step = r.integer("interleave_moe_layer_step", 1, 0, m.layers);
  for (int i = 0; i < m.layers; ++i) {
    if (step == 0 || (i + 1) % step != 0) m.dense_layers.push_back(i);
  }
  if (!r.has("attention_chunk_size")) return;
  const int chunk = static_cast<int>(r.integer("attention_chunk_size", 1, 1 << 30));
  std::vector<int> local;
  if (r.has("no_rope_layers")) {
    const std::vector<int64_t> rope = r.int_list("no_rope_layers", 1);
    if (static_cast<int>(rope.size()) != m.layers) {
      r.fail("no_rope_layers", fmt::format("'no_rope_layers': expected {} entries "
                                           "(num_hidden_layers), got {}",
                                           m.layers, rope.size()));
    }
    for (int i = 0; i < m.layers; ++i) {
      if (rope[static_cast<size_t>(i)] == 1) local.push_back(i);
    }
  } else {
    local = all_but_every(m.layers, r.integer("no_rope_layer_interval", 4, 1, m.layers + 1));
  }
  set_local_layers(m, ModelSpec::LocalKind::kChunked, chunk, local);
}

// vLLM phimoe.py: Mixtral's routed experts; attention_bias puts biases on Q, K, V and O.
void read_phimoe(const HfReader& r, ModelSpec& m) {
  (void)r;
  m.o_bias = m.qkv_bias;
}

// transformers' Qwen2Config/Qwen3Config (whose layer_types vLLM's qwen2.py and qwen3.py read):
// sliding_window counts only with use_sliding_window, and then on layers i >= max_window_layers
// (default 28), unless layer_types lists them.
void read_qwen_windows(const HfReader& r, ModelSpec& m) {
  if (!r.has("sliding_window") || !r.boolean("use_sliding_window", false)) return;
  const int window = static_cast<int>(r.integer("sliding_window", 1, 1 << 30));
  std::vector<int> local;
  if (auto typed = hf_layer_types(r, m, "sliding_attention")) {
    local = *typed;
  } else {
    const int64_t first = r.integer("max_window_layers", 28, 0, 1 << 20);
    for (int i = static_cast<int>(std::min<int64_t>(first, m.layers)); i < m.layers; ++i) {
      local.push_back(i);
    }
  }
  set_local_layers(m, ModelSpec::LocalKind::kSlidingWindow, window, local);
}

}  // namespace kvsim
