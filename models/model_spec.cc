#include "models/model_spec.h"

#include <fmt/format.h>

#include "core/config_node.h"
#include "core/units.h"
#include "models/parallelism.h"

namespace kvsim {

int64_t ModelSpec::kv_bytes_per_token() const {
  return int64_t{layers} * kv_elements_per_layer(kv_heads) * dtype_bytes(kv_dtype);
}

int ModelSpec::moe_layers_in(int begin, int end) const {
  if (!moe()) return 0;
  int dense = 0;
  for (int i : dense_layers) dense += i >= begin && i < end ? 1 : 0;
  return std::max(0, end - begin) - dense;
}

namespace {

// Parameters of one layer's attention: Q, K, V, O (and Qwen2's biases), or MLA's low-rank
// projections (vLLM DeepseekV2MLAAttention): q_a (h x q_lora) with its norm and q_b (q_lora x
// H x qk), or a full q_proj (h x H x qk); kv_a_proj_with_mqa (h x (kv_lora + rope)) with the
// latent's norm; kv_b (kv_lora x H x (qk_nope + v)); o (H x v x h).
int64_t attention_params(const ModelSpec& m) {
  const int64_t h = m.hidden;
  const int64_t heads = m.heads;
  if (m.mla()) {
    const int64_t ql = m.q_lora_rank, kl = m.kv_lora_rank, rope = m.qk_rope_head_dim;
    const int64_t qk = m.head_dim, nope = qk - rope, v = m.value_head_dim();
    int64_t p = ql > 0 ? h * ql + ql + ql * heads * qk : h * heads * qk;
    p += h * (kl + rope) + kl + kl * heads * (nope + v) + heads * v * h;
    return p;
  }
  const int64_t q_out = heads * m.head_dim;
  const int64_t kv_out = int64_t{m.kv_heads} * m.head_dim;
  int64_t attn = h * q_out + 2 * h * kv_out + q_out * h;
  if (m.qkv_bias) attn += q_out + 2 * kv_out;
  if (m.o_bias) attn += h;
  if (m.attention_sinks) attn += heads;
  return attn;
}

// Parameters of one MLP of width `ffn`: [gate,] up and down.
int64_t mlp_params(const ModelSpec& m, int64_t ffn) {
  return (m.gated_mlp ? 3 : 2) * int64_t{m.hidden} * ffn;
}

// Parameters of one MoE layer's MLP with `experts` routed experts counted: the router, the
// routed experts and the shared experts.
int64_t moe_mlp_params(const ModelSpec& m, int experts) {
  // gpt-oss's biases: the router's E, and per expert [gate and] up (f each) and down (h).
  const int64_t router_bias = m.expert_bias ? m.num_experts : 0;
  const int64_t expert_bias =
      m.expert_bias ? (m.gated_mlp ? 2 : 1) * int64_t{m.routed_ffn()} + m.hidden : 0;
  return int64_t{m.hidden} * m.num_experts + router_bias +
         experts * (mlp_params(m, m.routed_ffn()) + expert_bias) +
         mlp_params(m, m.shared_expert_ffn);
}

// Parameters of the decoder layers with `experts` routed experts counted in each MoE layer.
int64_t decoder_params(const ModelSpec& m, int experts) {
  // The layer's norms (two, Gemma 3's four), and Qwen3's and Gemma 3's per-head q_norm and k_norm.
  const int64_t norms =
      int64_t{m.layer_norms} * m.hidden + (m.qk_norm ? 2 * int64_t{m.head_dim} : 0);
  const int moe_layers = m.moe_layers_in(0, m.layers);
  const int dense_layers = m.layers - moe_layers;
  const int64_t attn = attention_params(m);
  return int64_t{m.layers} * (attn + norms) + int64_t{dense_layers} * mlp_params(m, m.ffn) +
         int64_t{moe_layers} * moe_mlp_params(m, experts);
}

int64_t embedding_params(const ModelSpec& m) {
  return int64_t{m.vocab} * m.hidden * (m.tied_embeddings ? 1 : 2);
}

}  // namespace

int64_t ModelSpec::param_count() const {
  return embedding_params(*this) + decoder_params(*this, num_experts) + hidden;
}

int64_t ModelSpec::active_param_count() const {
  return embedding_params(*this) + decoder_params(*this, experts_per_token) + hidden;
}

int64_t ModelSpec::mtp_param_count() const {
  const int64_t h = hidden;
  const int64_t layer = attention_params(*this) + int64_t{layer_norms} * h +
                        (moe() ? moe_mlp_params(*this, num_experts) : mlp_params(*this, ffn));
  // enorm, hnorm, eh_proj (2h -> h), the shared head's norm, embedding and LM head.
  const int64_t rest = 2 * h + 2 * h * h + h + 2 * int64_t{vocab} * h;
  return int64_t{mtp_layers} * (layer + rest);
}

int64_t ModelSpec::weights_bytes() const {
  // The single-GPU case of the per-GPU formula: param_count() x bytes for 16/32-bit weights,
  // quantized linear layers with their scales otherwise.
  return weights_bytes_on_gpu(*this, Parallelism{}, 0);
}

std::vector<std::string> ModelSpec::unmodelled_features() const {
  // A feature added to ModelSpec before its model goes here.
  std::vector<std::string> out;
  if (hybrid()) {
    out.push_back(fmt::format(
        "{} local-attention layers ({} of {}): the latency model costs them as full attention "
        "over the whole context (an overestimate past {} tokens)",
        local_attention->kind == LocalKind::kChunked ? "chunked" : "sliding-window",
        local_attention->layers.size(), layers, local_attention->size));
  }
  return out;
}

std::string ModelSpec::attention_kind() const {
  if (mla()) return "MLA";
  if (kv_heads == heads) return "MHA";
  if (kv_heads == 1) return "MQA";
  return "GQA";
}

namespace {

// local_attention: {kind: sliding_window | chunked, size: N, and either global_every: k (layer i
// is global when (i + 1) % k == 0: Gemma 3's 6, Llama 4's 4, gpt-oss's 2) or layers: [...] (the
// local ones, ascending)}.
ModelSpec::LocalAttention parse_local_attention(const ConfigNode& n, const ModelSpec& m) {
  if (!n.is_map()) n.fail_expected("a map {kind, size, global_every or layers}");
  if (m.sliding_window)
    n.fail("a model has either sliding_window (every layer) or local_attention");
  ModelSpec::LocalAttention la;
  la.kind = n.get_enum("kind", {"sliding_window", "chunked"}) == "chunked"
                ? ModelSpec::LocalKind::kChunked
                : ModelSpec::LocalKind::kSlidingWindow;
  la.size = n.get<int>("size", {.min = 1, .max = 1 << 30});
  const bool every = n.optional_child("global_every").has_value();
  const bool listed = n.optional_child("layers").has_value();
  if (every == listed) n.fail("expected one of global_every and layers");
  if (every) {
    const int k = n.get<int>("global_every", {.min = 2, .max = 1000});
    for (int i = 0; i < m.layers; ++i) {
      if ((i + 1) % k != 0) la.layers.push_back(i);
    }
  } else {
    const ConfigNode d = n.child("layers");
    if (!d.is_sequence()) d.fail_expected("a list of layer indices");
    for (size_t i = 0; i < d.size(); ++i) {
      const ConfigNode li = d.at(i);
      const int layer = li.as<int>({.min = 0, .max = m.layers - 1});
      if (!la.layers.empty() && layer <= la.layers.back()) {
        li.fail("expected layer indices in ascending order");
      }
      la.layers.push_back(layer);
    }
  }
  if (la.layers.empty() || static_cast<int>(la.layers.size()) == m.layers) {
    n.fail(
        "local_attention needs both local and global layers (a window on every layer is "
        "sliding_window)");
  }
  return la;
}

}  // namespace

ModelSpec parse_model_spec(const ConfigNode& n, const std::string& name) {
  if (!n.is_map()) n.fail_expected("a model spec (a map)");
  ModelSpec m;
  m.name = name;
  m.display_name = n.get<std::string>("display_name", name);
  m.source = n.get<std::string>("source", "inline");
  m.layers = n.get<int>("layers", {.min = 1, .max = 1000});
  m.heads = n.get<int>("heads", {.min = 1, .max = 4096});
  m.kv_heads = n.get<int>("kv_heads", m.heads, {.min = 1, .max = 4096});
  if (m.heads % m.kv_heads != 0) {
    n.child("kv_heads")
        .fail(fmt::format("expected a divisor of heads ({}), got {}", m.heads, m.kv_heads));
  }
  m.hidden = n.get<int>("hidden", {.min = 1, .max = 1 << 20});
  m.head_dim = n.get<int>("head_dim", m.hidden / m.heads, {.min = 1, .max = 4096});
  m.ffn = n.get<int>("ffn", {.min = 1, .max = 1 << 22});
  m.vocab = n.get<int>("vocab", {.min = 1, .max = 1 << 24});
  m.max_position = n.get<int64_t>("max_position", 4096, {.min = 1, .max = 1e9});
  m.num_experts = n.get<int>("num_experts", 1, {.min = 1, .max = 4096});
  m.experts_per_token = n.get<int>("experts_per_token", 1, {.min = 1, .max = m.num_experts});
  m.expert_ffn = n.get<int>("expert_ffn", 0, {.min = 0, .max = 1 << 22});
  m.shared_expert_ffn = n.get<int>("shared_expert_ffn", 0, {.min = 0, .max = 1 << 22});
  if (auto d = n.optional_child("dense_layers")) {
    if (!d->is_sequence()) d->fail_expected("a list of layer indices");
    for (size_t i = 0; i < d->size(); ++i) {
      const ConfigNode li = d->at(i);
      const int layer = li.as<int>({.min = 0, .max = m.layers - 1});
      if (!m.dense_layers.empty() && layer <= m.dense_layers.back()) {
        li.fail("expected layer indices in ascending order");
      }
      m.dense_layers.push_back(layer);
    }
  }
  m.kv_lora_rank = n.get<int>("kv_lora_rank", 0, {.min = 0, .max = 1 << 16});
  if (m.mla()) {
    m.q_lora_rank = n.get<int>("q_lora_rank", 0, {.min = 0, .max = 1 << 16});
    m.qk_rope_head_dim = n.get<int>("qk_rope_head_dim", {.min = 0, .max = m.head_dim - 1});
    m.v_head_dim = n.get<int>("v_head_dim", m.head_dim, {.min = 1, .max = 4096});
    if (m.kv_heads != 1)
      n.child("kv_heads").fail("an MLA model (kv_lora_rank) keeps 1 latent KV head");
  }
  m.mtp_layers = n.get<int>("mtp_layers", 0, {.min = 0, .max = 16});
  m.qkv_bias = n.get<bool>("qkv_bias", false);
  m.qk_norm = n.get<bool>("qk_norm", false);
  m.tied_embeddings = n.get<bool>("tied_embeddings", false);
  m.gated_mlp = n.get<bool>("gated_mlp", true);
  if (auto w = n.get_optional<int>("sliding_window", {.min = 1})) m.sliding_window = *w;
  m.o_bias = n.get<bool>("o_bias", false);
  m.attention_sinks = n.get<bool>("attention_sinks", false);
  m.expert_bias = n.get<bool>("expert_bias", false);
  m.layer_norms = n.get<int>("layer_norms", 2, {.min = 0, .max = 8});
  if (auto la = n.optional_child("local_attention"))
    m.local_attention = parse_local_attention(*la, m);
  auto dtype_of = [&](const char* key, DType fallback, bool weights) {
    if (!n.optional_child(key)) return fallback;
    const std::string v =
        weights ? n.get_enum(key, {"fp32", "fp16", "bf16", "fp8", "int8", "int4", "mxfp4", "nvfp4"})
                : n.get_enum(key, {"fp32", "fp16", "bf16", "fp8", "int8"});
    return parse_dtype(v);
  };
  m.weight_dtype = dtype_of("weight_dtype", DType::kFp16, true);
  m.kv_dtype = dtype_of("kv_dtype", DType::kFp16, false);
  m.weight_group = n.get<int>("weight_group", 0, {.min = 0, .max = 4096});
  if (n.optional_child("expert_weight_dtype")) {
    m.expert_weight_dtype = dtype_of("expert_weight_dtype", m.weight_dtype, true);
  }
  if (auto gb = n.get_optional<double>("weights_gb", {.min = 0, .max = 1e6})) {
    m.weights_bytes_override = gb_to_bytes(*gb);
  }
  n.get<std::string>("notes", "");  // free text, allowed anywhere in a spec
  return m;
}

}  // namespace kvsim
