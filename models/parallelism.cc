#include "models/parallelism.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/errors.h"

namespace kvsim {

namespace {

int64_t round_up_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes of one GPU's shard of a linear layer with `in` inputs and `out` outputs (already the
// shard's sizes), weights of type `w` and the scales its quantization scheme stores:
//   16/32-bit  none
//   fp8        one FP32 scale per weight matrix (vLLM Fp8LinearMethod, per-tensor)
//   int8       one FP32 scale per output channel (compressed-tensors W8A8, channelwise)
//   int4       per group of 128 input rows and per column: an FP16 scale and a 4-bit zero
//              packed 8 to an int32 (vLLM AWQLinearMethod: qweight, scales, qzeros)
int64_t linear_bytes(int64_t in, int64_t out, DType w) {
  const int64_t weights = round_up_div(in * out * dtype_bits(w), 8);
  switch (w) {
    case DType::kFp8: return weights + 4;
    case DType::kInt8: return weights + out * 4;
    case DType::kInt4: {
      const int64_t groups = round_up_div(in, kInt4GroupSize);
      return weights + groups * out * 2 + groups * round_up_div(out, 8) * 4;
    }
    default: return weights;
  }
}

}  // namespace

void check_parallelism(const ModelSpec& m, Parallelism par) {
  const int t = par.tensor;
  auto refuse = [&](const std::string& why) {
    throw InputError(fmt::format("model {} cannot run at {}: {}", m.name, parallelism_text(par), why));
  };
  if (t < 1 || par.pipeline < 1) refuse("degrees must be >= 1");
  if (m.heads % t != 0) refuse(fmt::format("{} query heads do not split {} ways", m.heads, t));
  if (m.kv_heads % t != 0 && t % m.kv_heads != 0) {
    refuse(fmt::format("{} KV heads neither split {} ways nor divide {} (for replicas)", m.kv_heads,
                       t, t));
  }
  if (m.ffn % t != 0) refuse(fmt::format("MLP width {} does not split {} ways", m.ffn, t));
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

int64_t weights_bytes_on_gpu(const ModelSpec& m, Parallelism par, int stage) {
  KVSIM_CHECK(stage >= 0 && stage < par.pipeline, "stage {} of {}", stage, par.pipeline);
  if (m.weights_bytes_override) return round_up_div(*m.weights_bytes_override, par.gpus());
  const int t = par.tensor;
  const DType w = m.weight_dtype;
  const int64_t mb = unquantized_bytes(w);
  const int64_t h = m.hidden;
  const int64_t q_out = int64_t{m.heads} / t * m.head_dim;
  const int64_t kv_out = int64_t{kv_heads_per_gpu(m, t)} * m.head_dim;
  const int64_t f = int64_t{m.ffn} / t;
  // Column-parallel Q, K, V, gate and up split their outputs; row-parallel O and down split
  // their inputs; norms and the router are replicated (vLLM ReplicatedLinear for the gate).
  int64_t layer = 2 * h * mb;
  if (m.qk_norm) layer += 2 * int64_t{m.head_dim} * mb;  // q_norm, k_norm: replicated
  layer += linear_bytes(h, q_out, w) + 2 * linear_bytes(h, kv_out, w) + linear_bytes(q_out, h, w);
  if (m.qkv_bias) layer += (q_out + 2 * kv_out) * mb;
  if (m.num_experts > 1) layer += h * m.num_experts * mb;
  layer += int64_t{m.num_experts} *
           ((m.gated_mlp ? 2 : 1) * linear_bytes(h, f, w) + linear_bytes(f, h, w));
  const std::vector<int> layers = stage_layers(m.layers, par.pipeline);
  int64_t bytes = layers[static_cast<size_t>(stage)] * layer;
  const int64_t embed = vocab_per_gpu(m, t) * h * mb;
  const bool first = stage == 0;
  const bool last = stage == par.pipeline - 1;
  if (first) bytes += embed;
  if (last) {
    bytes += h * mb;                                    // final norm
    if (!m.tied_embeddings || !first) bytes += embed;  // LM head
  }
  return bytes;
}

int64_t kv_bytes_per_token_on_gpu(const ModelSpec& m, Parallelism par, int stage) {
  const std::vector<int> layers = stage_layers(m.layers, par.pipeline);
  return int64_t{2} * layers[static_cast<size_t>(stage)] * kv_heads_per_gpu(m, par.tensor) *
         m.head_dim * dtype_bytes(m.kv_dtype);
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
  m.layers = stage_layers(model.layers, par.pipeline)[static_cast<size_t>(stage)];
  return m;
}

std::string parallelism_text(Parallelism par) {
  return fmt::format("TP {} x PP {} ({} GPU{})", par.tensor, par.pipeline, par.gpus(),
                     par.gpus() == 1 ? "" : "s");
}

}  // namespace kvsim
