#include "models/model_spec.h"

#include <fmt/format.h>

#include "core/config_node.h"
#include "core/units.h"
#include "models/parallelism.h"

namespace kvsim {

int64_t ModelSpec::kv_bytes_per_token() const {
  return int64_t{2} * layers * kv_heads * head_dim * dtype_bytes(kv_dtype);
}

namespace {

// Parameters of one decoder layer with `experts` MLP experts.
int64_t layer_params(const ModelSpec& m, int experts) {
  const int64_t q_out = int64_t{m.heads} * m.head_dim;
  const int64_t kv_out = int64_t{m.kv_heads} * m.head_dim;
  int64_t attn = int64_t{m.hidden} * q_out + 2 * int64_t{m.hidden} * kv_out + q_out * m.hidden;
  if (m.qkv_bias) attn += q_out + 2 * kv_out;
  const int64_t mlp = (m.gated_mlp ? 3 : 2) * int64_t{m.hidden} * m.ffn;  // [gate,] up, down
  const int64_t router = m.num_experts > 1 ? int64_t{m.hidden} * m.num_experts : 0;
  const int64_t norms = 2 * int64_t{m.hidden} + (m.qk_norm ? 2 * int64_t{m.head_dim} : 0);
  return attn + experts * mlp + router + norms;
}

}  // namespace

int64_t ModelSpec::param_count() const {
  const int64_t embed = int64_t{vocab} * hidden * (tied_embeddings ? 1 : 2);
  return embed + int64_t{layers} * layer_params(*this, num_experts) + hidden;
}

int64_t ModelSpec::active_param_count() const {
  const int64_t embed = int64_t{vocab} * hidden * (tied_embeddings ? 1 : 2);
  return embed + int64_t{layers} * layer_params(*this, experts_per_token) + hidden;
}

int64_t ModelSpec::weights_bytes() const {
  // The single-GPU case of the per-GPU formula: param_count() x bytes for 16/32-bit weights,
  // quantized linear layers with their scales otherwise.
  return weights_bytes_on_gpu(*this, Parallelism{}, 0);
}

std::vector<std::string> ModelSpec::unmodelled_features() const {
  // Every feature the catalog carries is modelled today (sliding-window attention was the last:
  // see docs/memory.md); a feature added to ModelSpec before its model goes here.
  return {};
}

std::string ModelSpec::attention_kind() const {
  if (kv_heads == heads) return "MHA";
  if (kv_heads == 1) return "MQA";
  return "GQA";
}

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
    n.child("kv_heads").fail(fmt::format(
        "expected a divisor of heads ({}), got {}", m.heads, m.kv_heads));
  }
  m.hidden = n.get<int>("hidden", {.min = 1, .max = 1 << 20});
  m.head_dim = n.get<int>("head_dim", m.hidden / m.heads, {.min = 1, .max = 4096});
  m.ffn = n.get<int>("ffn", {.min = 1, .max = 1 << 22});
  m.vocab = n.get<int>("vocab", {.min = 1, .max = 1 << 24});
  m.max_position = n.get<int64_t>("max_position", 4096, {.min = 1, .max = 1e9});
  m.num_experts = n.get<int>("num_experts", 1, {.min = 1, .max = 4096});
  m.experts_per_token = n.get<int>("experts_per_token", 1, {.min = 1, .max = m.num_experts});
  m.qkv_bias = n.get<bool>("qkv_bias", false);
  m.qk_norm = n.get<bool>("qk_norm", false);
  m.tied_embeddings = n.get<bool>("tied_embeddings", false);
  m.gated_mlp = n.get<bool>("gated_mlp", true);
  if (auto w = n.get_optional<int>("sliding_window", {.min = 1})) m.sliding_window = *w;
  auto dtype_of = [&](const char* key, DType fallback) {
    if (!n.optional_child(key)) return fallback;
    const std::string v = n.get_enum(key, {"fp32", "fp16", "bf16", "fp8", "int8"});
    return parse_dtype(v);
  };
  m.weight_dtype = dtype_of("weight_dtype", DType::kFp16);
  m.kv_dtype = dtype_of("kv_dtype", DType::kFp16);
  if (auto gb = n.get_optional<double>("weights_gb", {.min = 0, .max = 1e6})) {
    m.weights_bytes_override = gb_to_bytes(*gb);
  }
  n.get<std::string>("notes", "");  // free text, allowed anywhere in a spec
  return m;
}

}  // namespace kvsim
