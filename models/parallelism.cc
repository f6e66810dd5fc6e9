#include "models/parallelism.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/errors.h"

namespace kvsim {

namespace {

int64_t round_up_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes of one GPU's shard of a linear layer with `in` inputs and `out` outputs (already the
// shard's sizes), weights of type `w` and the scales its quantization scheme stores (`group`:
// ModelSpec::weight_group):
//   16/32-bit  none
//   fp8        one FP32 scale per weight matrix (vLLM Fp8LinearMethod, per-tensor), or with
//              group b one FP32 scale per b x b block (weight_scale_inv, block-wise as DeepSeek
//              ships it: ceil(out / b) x ceil(in / b))
//   int8       one FP32 scale per output channel (compressed-tensors W8A8, channelwise)
//   int4       per group of g input rows (g = group, else 128) and per column: an FP16 scale
//              and a 4-bit zero packed 8 to an int32 (vLLM AWQLinearMethod: qweight, scales,
//              qzeros; GPTQ stores the same)
//   mxfp4      one E8M0 byte per 32 inputs of a column (OCP MX; vLLM Mxfp4MoEMethod's scales)
//   nvfp4      one FP8 byte per 16 inputs of a column, an FP32 tensor scale and an FP32 input
//              scale (vLLM ModelOptNvFp4LinearMethod: weight_scale, weight_scale_2, input_scale)
int64_t linear_bytes(int64_t in, int64_t out, DType w, int group) {
  const int64_t weights = round_up_div(in * out * dtype_bits(w), 8);
  switch (w) {
    case DType::kFp8:
      return group > 0 ? weights + round_up_div(in, group) * round_up_div(out, group) * 4
                       : weights + 4;
    case DType::kInt8: return weights + out * 4;
    case DType::kInt4: {
      const int64_t groups = round_up_div(in, group > 0 ? group : kInt4GroupSize);
      return weights + groups * out * 2 + groups * round_up_div(out, 8) * 4;
    }
    case DType::kMxfp4: return weights + round_up_div(in, kMxfp4Group) * out;
    case DType::kNvfp4: return weights + round_up_div(in, kNvfp4Group) * out + 8;
    default: return weights;
  }
}

}  // namespace

void check_parallelism(const ModelSpec& m, Parallelism par) {
  const int t = par.tensor;
  auto refuse = [&](const std::string& why) {
    throw InputError(
        fmt::format("model {} cannot run at {}: {}", m.name, parallelism_text(par), why));
  };
  if (t < 1 || par.pipeline < 1) refuse("degrees must be >= 1");
  if (m.heads % t != 0) refuse(fmt::format("{} query heads do not split {} ways", m.heads, t));
  if (m.kv_heads % t != 0 && t % m.kv_heads != 0) {
    refuse(fmt::format("{} KV heads neither split {} ways nor divide {} (for replicas)", m.kv_heads,
                       t, t));
  }
  if (par.data < 1) refuse("degrees must be >= 1");
  const bool dense_mlp = !m.moe() || m.moe_layers_in(0, m.layers) < m.layers;
  if (dense_mlp && m.ffn % t != 0) {
    refuse(fmt::format("MLP width {} does not split {} ways", m.ffn, t));
  }
  if (m.moe()) {
    const int g = par.expert_group();
    if (par.expert && g > m.num_experts) {
      refuse(fmt::format("{} experts cannot fill {} expert-parallel GPUs", m.num_experts, g));
    }
    if (!par.expert && m.routed_ffn() % g != 0) {
      refuse(fmt::format("expert MLP width {} does not split {} ways", m.routed_ffn(), g));
    }
    if (m.shared_expert_ffn % t != 0) {
      refuse(
          fmt::format("shared-expert MLP width {} does not split {} ways", m.shared_expert_ffn, t));
    }
  } else if (par.expert) {
    refuse("expert parallelism needs a mixture-of-experts model");
  }
  if (par.pipeline > m.layers) {
    refuse(fmt::format("{} layers cannot fill {} pipeline stages", m.layers, par.pipeline));
  }
}

int kv_heads_per_gpu(const ModelSpec& m, int tensor) {
  return m.kv_heads >= tensor ? m.kv_heads / tensor : 1;
}

int64_t vocab_per_gpu(const ModelSpec& m, int tensor) {
  if (tensor == 1) return m.vocab;
  return round_up_div(m.vocab, kVocabPadding) * kVocabPadding / tensor;
}

std::vector<int> stage_layers(int layers, int pipeline) {
  KVSIM_CHECK(pipeline >= 1 && pipeline <= layers, "{} layers over {} stages", layers, pipeline);
  std::vector<int> out(static_cast<size_t>(pipeline), layers / pipeline);
  // The remainder goes to the stages just before the last one, which also carries the LM head.
  const int rest = layers % pipeline;
  for (int i = 2; i < rest + 2; ++i) out[static_cast<size_t>(pipeline - i)] += 1;
  return out;
}

int local_experts(const ModelSpec& m, Parallelism par) {
  if (!m.moe() || !par.expert) return m.num_experts;
  return static_cast<int>(round_up_div(m.num_experts, par.expert_group()));
}

int64_t routed_ffn_per_gpu(const ModelSpec& m, Parallelism par) {
  return par.expert ? m.routed_ffn() : m.routed_ffn() / par.expert_group();
}

namespace {

// Bytes of one gated (or up/down) MLP of width f (already the shard's).
int64_t mlp_bytes(const ModelSpec& m, int64_t f, DType w) {
  if (f == 0) return 0;
  const int64_t h = m.hidden;
  const int g = m.weight_group;
  return (m.gated_mlp ? 2 : 1) * linear_bytes(h, f, w, g) + linear_bytes(f, h, w, g);
}

// Bytes of one layer's attention on a GPU of t (norms aside). Column-parallel Q, K, V split
// their outputs, row-parallel O its inputs. MLA (vLLM DeepseekV2MLAAttention): the down
// projections q_a and kv_a_proj_with_mqa and the two latent norms are replicated, q_b (or
// q_proj), kv_b and o split by heads.
int64_t attention_bytes(const ModelSpec& m, int t) {
  const DType w = m.weight_dtype;
  const int64_t mb = unquantized_bytes(w);
  const int64_t h = m.hidden;
  const int64_t heads = int64_t{m.heads} / t;
  const auto linear_bytes = [&](int64_t in, int64_t out, DType d) {
    return kvsim::linear_bytes(in, out, d, m.weight_group);
  };
  if (m.mla()) {
    const int64_t ql = m.q_lora_rank, kl = m.kv_lora_rank, rope = m.qk_rope_head_dim;
    const int64_t qk = m.head_dim, nope = qk - rope, v = m.value_head_dim();
    int64_t b = ql > 0 ? linear_bytes(h, ql, w) + ql * mb + linear_bytes(ql, heads * qk, w)
                       : linear_bytes(h, heads * qk, w);
    b += linear_bytes(h, kl + rope, w) + kl * mb;
    b += linear_bytes(kl, heads * (nope + v), w) + linear_bytes(heads * v, h, w);
    return b;
  }
  const int64_t q_out = heads * m.head_dim;
  const int64_t kv_out = int64_t{kv_heads_per_gpu(m, t)} * m.head_dim;
  int64_t b =
      linear_bytes(h, q_out, w) + 2 * linear_bytes(h, kv_out, w) + linear_bytes(q_out, h, w);
  if (m.qkv_bias) b += (q_out + 2 * kv_out) * mb;
  if (m.o_bias) b += h * mb;               // a row-parallel bias is whole on every GPU
  if (m.attention_sinks) b += heads * mb;  // this GPU's heads' sinks
  return b;
}

}  // namespace

int64_t weights_bytes_on_gpu(const ModelSpec& m, Parallelism par, int stage) {
  KVSIM_CHECK(stage >= 0 && stage < par.pipeline, "stage {} of {}", stage, par.pipeline);
  if (m.weights_bytes_override) return round_up_div(*m.weights_bytes_override, par.gpus());
  const int t = par.tensor;
  const DType w = m.weight_dtype;
  const int64_t mb = unquantized_bytes(w);
  const int64_t h = m.hidden;
  // Every layer: two norms (replicated) and its attention. Dense layers: the MLP split t ways.
  // MoE layers: the router (replicated, vLLM ReplicatedLinear for the gate), the shared experts
  // split t ways (an MLP on the attention's TP group) and the routed experts this GPU holds.
  // Qwen3's q_norm and k_norm are replicated too.
  const int64_t layer = m.layer_norms * h * mb + (m.qk_norm ? 2 * int64_t{m.head_dim} * mb : 0) +
                        attention_bytes(m, t);
  const int64_t dense = mlp_bytes(m, m.ffn / t, w);
  int64_t moe = 0;
  if (m.moe()) {
    // gpt-oss's biases stay 16-bit: the router's E, and per held expert [gate and] up over its
    // share of the width and down's whole h.
    const int64_t f = routed_ffn_per_gpu(m, par);
    const int64_t expert_bias = m.expert_bias ? ((m.gated_mlp ? 2 : 1) * f + h) * mb : 0;
    moe = h * m.num_experts * mb + (m.expert_bias ? m.num_experts * mb : 0) +
          mlp_bytes(m, m.shared_expert_ffn / t, w) +
          int64_t{local_experts(m, par)} * (mlp_bytes(m, f, m.routed_weight_dtype()) + expert_bias);
  }
  const std::vector<int> layers = stage_layers(m.layers, par.pipeline);
  int begin = 0;
  for (int s = 0; s < stage; ++s) begin += layers[static_cast<size_t>(s)];
  const int n = layers[static_cast<size_t>(stage)];
  const int moe_layers = m.moe_layers_in(begin, begin + n);
  int64_t bytes = n * layer + (n - moe_layers) * dense + moe_layers * moe;
  const int64_t embed = vocab_per_gpu(m, t) * h * mb;
  const bool first = stage == 0;
  const bool last = stage == par.pipeline - 1;
  if (first) bytes += embed + round_up_div(m.vision_params * mb, t);
  if (last) {
    bytes += h * mb;                                   // final norm
    if (!m.tied_embeddings || !first) bytes += embed;  // LM head
  }
  return bytes;
}

int64_t kv_bytes_per_token_on_gpu(const ModelSpec& m, Parallelism par, int stage) {
  const std::vector<int> layers = stage_layers(m.layers, par.pipeline);
  return int64_t{layers[static_cast<size_t>(stage)]} *
         m.kv_elements_per_layer(kv_heads_per_gpu(m, par.tensor)) * dtype_bytes(m.kv_dtype);
}

ModelSpec gpu_share(const ModelSpec& model, Parallelism par, int stage) {
  if (par.single()) return model;
  check_parallelism(model, par);
  ModelSpec m = model;
  m.weights_bytes_override = weights_bytes_on_gpu(model, par, stage);
  m.heads = model.heads / par.tensor;
  m.kv_heads = kv_heads_per_gpu(model, par.tensor);
  m.ffn = model.ffn / par.tensor;
  m.vocab = static_cast<int>(vocab_per_gpu(model, par.tensor));
  const std::vector<int> layers = stage_layers(model.layers, par.pipeline);
  int begin = 0;
  for (int s = 0; s < stage; ++s) begin += layers[static_cast<size_t>(s)];
  m.layers = layers[static_cast<size_t>(stage)];
  if (model.local_attention) {
    // The stage's local layers, renumbered from 0; a stage of one kind only is no longer hybrid
    // (all sliding: the uniform window).
    std::vector<int> local;
    for (int i : model.local_attention->layers) {
      if (i >= begin && i < begin + m.layers) local.push_back(i - begin);
    }
    m.local_attention.reset();
    if (!local.empty() && static_cast<int>(local.size()) == m.layers &&
        model.local_attention->kind == ModelSpec::LocalKind::kSlidingWindow) {
      m.sliding_window = model.local_attention->size;
    } else if (!local.empty()) {
      m.local_attention = ModelSpec::LocalAttention{model.local_attention->kind,
                                                    model.local_attention->size, local};
    }
  }
  if (model.moe()) {
    m.num_experts = local_experts(model, par);
    m.experts_per_token = std::min(model.experts_per_token, m.num_experts);
    m.expert_ffn = static_cast<int>(routed_ffn_per_gpu(model, par));
    m.shared_expert_ffn = model.shared_expert_ffn / par.tensor;
    // The stage's dense layers, renumbered from 0.
    m.dense_layers.clear();
    for (int i : model.dense_layers) {
      if (i >= begin && i < begin + m.layers) m.dense_layers.push_back(i - begin);
    }
    // A stage of dense layers only is no longer a MoE model's share: keep one expert slot so that
    // moe() stays true only where the stage has MoE layers.
    if (m.moe_layers_in(0, m.layers) == 0) m.num_experts = m.experts_per_token = 1;
  }
  return m;
}

std::string parallelism_text(Parallelism par) {
  if (par.data == 1 && !par.expert) {
    return fmt::format("TP {} x PP {} ({} GPU{})", par.tensor, par.pipeline, par.gpus(),
                       par.gpus() == 1 ? "" : "s");
  }
  const int all = par.gpus() * par.data;
  return fmt::format("DP {} x TP {} x PP {}{} ({} GPU{})", par.data, par.tensor, par.pipeline,
                     par.expert ? " with EP" : "", all, all == 1 ? "" : "s");
}

}  // namespace kvsim
