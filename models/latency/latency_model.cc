#include "models/latency/latency_model.h"

#include <cmath>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "core/check.h"
#include "core/errors.h"
#include "models/latency/costing.h"
#include "models/latency/fused_moe.h"
#include "models/latency/latency_shape.h"
#include "models/latency/sampler_cost.h"
#include "models/parallelism.h"

namespace kvsim {

namespace {

// Adds one operation to the iteration's sums (and its list with keep_ops); an operation with no
// work is left out.
void add(IterationCost& it, bool keep_ops, const OpCost& o) {
  if (o.flops == 0 && o.bytes == 0) return;
  it.ops_seconds += o.seconds;
  it.flops += o.flops;
  it.bytes += o.bytes;
  if (keep_ops) it.ops.push_back(o);
}

// Expected number of distinct experts that m tokens route to (uniform top-k routing).
double experts_touched(double experts, double topk, double m) {
  if (experts <= 1) return 1.0;
  return experts * (1.0 - std::pow(1.0 - topk / experts, m));
}

// A decode-only batch with the given totals, in the aggregate form: the cost depends on contexts
// only through their sum, which is of attended tokens (each already within a sliding window).
BatchShape decode_batch(int64_t num_seqs, int64_t total_context_tokens, int block_tokens) {
  KVSIM_CHECK(num_seqs >= 0 && total_context_tokens >= num_seqs, "decode {} seqs, {} context",
              num_seqs, total_context_tokens);
  BatchShape b;
  b.block_tokens = block_tokens;
  b.decode_seqs = num_seqs;
  b.decode_context_tokens = total_context_tokens;
  return b;
}

}  // namespace

BatchRows batch_rows(const BatchShape& batch, const ModelSpec& model) {
  KVSIM_CHECK(batch.block_tokens >= 0, "block_tokens {}", batch.block_tokens);
  BatchRows r{0, 0, 0, 0};
  for (const PrefillChunk& c : batch.prefill) {
    KVSIM_CHECK(c.tokens >= 1 && c.context_tokens >= 0, "prefill chunk {} + {}", c.tokens,
                c.context_tokens);
    r.m += static_cast<double>(c.tokens);
    r.emit += c.emits_token ? 1 : 0;
  }
  for (const DecodeSeq& d : batch.decode) {
    KVSIM_CHECK(d.context_tokens >= 1, "decode context {}", d.context_tokens);
    r.t += static_cast<double>(model.attended_tokens(d.context_tokens));  // the window's KV
  }
  // Integers below 2^53 add exactly in a double, so adding the aggregate gives the same t as
  // adding its sequences one by one.
  KVSIM_CHECK(batch.decode_seqs >= 0 && batch.decode_context_tokens >= batch.decode_seqs,
              "decode aggregate {} seqs, {} context", batch.decode_seqs,
              batch.decode_context_tokens);
  r.t += static_cast<double>(batch.decode_context_tokens);
  r.n = static_cast<double>(static_cast<int64_t>(batch.decode.size()) + batch.decode_seqs);
  r.m += r.n;
  r.emit += r.n;
  return r;
}

std::string_view bound_name(Bound b) { return b == Bound::kCompute ? "compute" : "memory"; }

LatencyModel::LatencyModel(ModelSpec model, GpuSpec gpu, Profile profile, AttentionKind attention,
                           int tensor_parallel, int pipeline_parallel)
    : LatencyModel(std::move(model), std::move(gpu), std::move(profile), attention,
                   Parallelism{tensor_parallel, pipeline_parallel}) {}

LatencyModel::LatencyModel(ModelSpec model, GpuSpec gpu, Profile profile, AttentionKind attention,
                           Parallelism parallelism)
    : model_(std::move(model)),
      gpu_(std::move(gpu)),
      profile_(std::move(profile)),
      ideal_(ideal_profile()),
      attention_(attention),
      tp_(parallelism.tensor),
      pp_(parallelism.pipeline),
      par_(parallelism) {
  if (tp_ < 1) throw InputError(fmt::format("tensor parallel degree {}: expected >= 1", tp_));
  if (pp_ < 1) throw InputError(fmt::format("pipeline parallel degree {}: expected >= 1", pp_));
  if (model_.heads % tp_ != 0 || (model_.kv_heads >= tp_ && model_.kv_heads % tp_ != 0)) {
    throw InputError(fmt::format("model {} ({} heads, {} KV heads) cannot be split {} ways",
                                 model_.name, model_.heads, model_.kv_heads, tp_));
  }
  if (!(gpu_.fp16_flops > 0) || !(gpu_.hbm_bytes_per_s > 0)) {
    throw InputError(fmt::format("GPU {}: peak FLOP/s and bandwidth must be > 0", gpu_.name));
  }
  if (model_.layers < 1 || model_.hidden < 1 || model_.heads < 1 || model_.head_dim < 1) {
    throw InputError(
        fmt::format("model {}: layers, hidden, heads and head_dim must be >= 1", model_.name));
  }
  check_parallelism(model_, par_);
  shape_ = std::make_shared<const LatencyShape>(latency_shape_of(model_, gpu_, par_));
  set_collective_settings(CollectiveSettings{});
}

void LatencyModel::set_collective_settings(const CollectiveSettings& settings) {
  KVSIM_CHECK(gemm_memo_.empty() && decode_memo_.empty() && row_memo_.empty(),
              "collective settings after costing");
  comm_settings_ = settings;
  if (par_.single()) return;  // one GPU: no collective runs (and no table is read)
  comm_ = std::make_shared<const Collectives>(gpu_, par_, settings, CollectiveTables::builtin());
  if (settings.graph_decode_only) {
    CollectiveSettings eager = settings;
    eager.enforce_eager = true;
    comm_eager_ =
        std::make_shared<const Collectives>(gpu_, par_, eager, CollectiveTables::builtin());
  }
}

const Collectives* LatencyModel::collectives_for(const BatchShape& batch, bool ideal) const {
  if (ideal) return nullptr;  // the lower bound: the derived formula at peak
  return comm_eager_ != nullptr && !batch.prefill.empty() ? comm_eager_.get() : comm_.get();
}

IterationCost LatencyModel::cost(const BatchShape& batch, const Profile& p, bool ideal,
                                 bool keep_ops) const {
  const BatchRows rows_in = batch_rows(batch, model_);
  const LatencyShape& s = *shape_;
  const double m = rows_in.m, emit = rows_in.emit, n = rows_in.n, t = rows_in.t;
  IterationCost it;
  if (m == 0) return it;
  if (keep_ops) it.ops.reserve(16);  // cost()'s operations, at most 13
  // The GEMM memo's entries of this row count are likely out of cache (a mixed batch's row
  // count varies); start loading them now, so Costing's setup and the ops before the first
  // GEMM run while they arrive. Only a hint: no result depends on it.
  if (!ideal && m < static_cast<double>(gemm_memo_.size())) {
    const char* row = reinterpret_cast<const char*>(&gemm_memo_[static_cast<size_t>(m)]);
    for (size_t line = 0; line < sizeof(gemm_memo_[0]); line += 64) __builtin_prefetch(row + line);
  }
  const Costing k(s, gpu_, p, ideal, ideal ? nullptr : &gemm_memo_, collectives_for(batch, ideal));

  const double L = s.layers;
  const double q_out = s.q_heads * s.head_dim;
  const double kv_out = s.kv_heads * s.head_dim;
  add(it, keep_ops, k.embedding(m));
  if (s.kv_lora > 0) {
    // MLA's projections (vLLM DeepseekV2MLAAttention): q_a then q_b (or one q_proj), and
    // kv_a_proj_with_mqa to the latent and rotary key, as one op.
    const double latent = s.kv_lora + s.rope_dim;
    OpCost q = s.q_lora > 0
                   ? merged("", k.gemm("", m, s.hidden, s.q_lora, s.hidden * s.q_lora, L, -1),
                            k.gemm("", m, s.q_lora, q_out, s.q_lora * q_out, L, -1))
                   : k.gemm("", m, s.hidden, q_out, s.hidden * q_out, L, -1);
    add(it, keep_ops,
        merged("qkv_proj", q, k.gemm("", m, s.hidden, latent, s.hidden * latent, L, -1)));
    add(it, keep_ops,
        k.elementwise("kv_cache_write", {m * s.kv_elems * (kActBytes + s.kvb)}, 0.0, L, m));
  } else {
    add(it, keep_ops,
        k.gemm("qkv_proj", m, s.hidden, q_out + 2 * kv_out, s.hidden * (q_out + 2 * kv_out), L, 0));
    if (s.qk_norm) {
      // Qwen3's q_norm and k_norm: two RMSNorm kernels (read + write), a CTA per head row.
      add(it, keep_ops,
          k.elementwise("qk_norm", {2 * m * q_out * kActBytes, 2 * m * kv_out * kActBytes},
                        5 * m * (q_out + kv_out), L, m, {m * s.q_heads, m * s.kv_heads}));
    }
    add(it, keep_ops,
        k.elementwise("kv_cache_write", {m * 2 * kv_out * (kActBytes + s.kvb)}, 0.0, L, m));
  }
  // With the tiled varlen kernel, a mixed batch's decodes run inside the prefill kernel.
  const bool varlen = !batch.prefill.empty() && k.varlen_tiles(attention_);
  if (!batch.prefill.empty()) {
    add(it, keep_ops,
        k.prefill_attention(batch.prefill, attention_, varlen ? n : 0, varlen ? t : 0));
  }
  if (n > 0 && !varlen) {
    add(it, keep_ops,
        k.decode_attention(n, t, batch.block_tokens, attention_, !batch.prefill.empty()));
  }
  if (s.kv_lora > 0) {
    const double v_out = s.q_heads * s.v_head_dim;
    add(it, keep_ops, k.gemm("o_proj", m, v_out, s.hidden, v_out * s.hidden, L, 1));
  } else {
    add(it, keep_ops, k.gemm("o_proj", m, q_out, s.hidden, q_out * s.hidden, L, 1));
  }
  if (s.tp > 1)
    add(it, keep_ops, k.allreduce(m));  // both per-layer calls (after O and after the MLP)

  // MLP (SwiGLU): gate and up in one GEMM, then down. A dense model's every layer; a MoE
  // model's dense layers as one op (dense_mlp). MoE layers route each row to top-k experts and
  // read the weights of every expert some row routed to; their shared experts see every row.
  const double moe_L = s.moe_layers;
  double rows = m * s.topk;  // rows through one layer's routed experts on this GPU
  if (s.experts > 1) {
    add(it, keep_ops,
        k.gemm("router", m, s.hidden, s.experts, s.hidden * s.experts, moe_L, 4,
               Weights::kUnquantized));
    // The tokens entering the layer (d replicas' batches) route uniformly: this GPU's experts
    // (all of them without expert parallelism) take their share of the rows.
    const double tokens = batch.moe_group_tokens > 0 ? static_cast<double>(batch.moe_group_tokens)
                                                     : m * s.moe_token_scale;
    const double share = s.local_experts / s.experts;
    rows = share == 1.0 ? tokens * s.topk : std::ceil(tokens * s.topk * share);
    const double touched = experts_touched(s.experts, s.topk, tokens) * share;
    const double f = s.expert_ffn;
    if (!ideal && p.routed_experts.fitted) {
      // The fused-MoE kernel's fitted term (models/latency/fused_moe.h), from measured moe.csv.
      add(it, keep_ops,
          fused_moe_op(p.routed_experts, routed_experts_work(rows, touched, s.hidden, f, s.xwb),
                       moe_L, gpu_.hbm_bytes_per_s, gpu_.fp16_flops * s.expert_flops_scale));
    } else {
      add(it, keep_ops,
          k.gemm("mlp_gate_up", rows, s.hidden, 2 * f, touched * s.hidden * 2 * f, moe_L, -1,
                 Weights::kExperts));
      add(it, keep_ops,
          k.gemm("mlp_down", rows, f, s.hidden, touched * f * s.hidden, moe_L, -1,
                 Weights::kExperts));
    }
    if (s.shared_ffn > 0) {
      const double sf = s.shared_ffn;
      add(it, keep_ops,
          merged("shared_experts", k.gemm("", m, s.hidden, 2 * sf, s.hidden * 2 * sf, moe_L, -1),
                 k.gemm("", m, sf, s.hidden, sf * s.hidden, moe_L, -1)));
    }
    if (s.dense_layers > 0) {
      add(it, keep_ops,
          merged("dense_mlp",
                 k.gemm("", m, s.hidden, 2 * s.ffn, s.hidden * 2 * s.ffn, s.dense_layers, -1),
                 k.gemm("", m, s.ffn, s.hidden, s.ffn * s.hidden, s.dense_layers, -1)));
    }
    if (s.ep_group > 1 && s.moe_token_scale > 1) add(it, keep_ops, k.all_to_all(m, tokens));
  } else {
    add(it, keep_ops, k.gemm("mlp_gate_up", rows, s.hidden, 2 * s.ffn, s.hidden * 2 * s.ffn, L, 2));
    add(it, keep_ops, k.gemm("mlp_down", rows, s.ffn, s.hidden, s.ffn * s.hidden, L, 3));
  }

  // Per layer, as vLLM runs them: two fused residual-add + RMSNorm kernels (LlamaDecoderLayer and
  // the other decoders call input_layernorm and post_attention_layernorm with the residual, and
  // RMSNorm.forward_cuda then runs fused_add_rms_norm: one kernel that reads x and the residual
  // and writes both in place; vllm/model_executor/layers/layernorm.py, models/llama.py), SiLU x
  // up (2 reads, 1 write of the ffn rows), rotary on Q and K (read+write). Across the model that
  // is the 2L - 1 fused norms of the layers plus the final norm (also fused); the first layer's
  // input norm, a plain rms_norm (no residual yet), is the one norm left out.
  const double norm_elems = m * s.hidden;
  // Activation elements per layer: the routed rows (and shared experts) of MoE layers, the
  // dense MLP's elsewhere, averaged over the layers.
  double act_elems = rows * s.ffn;
  if (s.experts > 1) {
    const double moe_act = rows * s.expert_ffn + m * s.shared_ffn;
    act_elems = s.dense_layers == 0 ? moe_act : (moe_L * moe_act + s.dense_layers * m * s.ffn) / L;
  }
  const double rope_elems = s.kv_lora > 0 ? m * (s.q_heads + 1) * s.rope_dim : m * (q_out + kv_out);
  const double fused_norm_b = 4 * norm_elems * kActBytes;
  const double ew_flops = 10 * norm_elems + 5 * act_elems + 3 * rope_elems;
  add(it, keep_ops,
      k.elementwise(
          "norm_act_residual",
          {fused_norm_b, fused_norm_b, 3 * act_elems * kActBytes, 2 * rope_elems * kActBytes},
          ew_flops, L, m));
  if (emit > 0) {
    add(it, keep_ops,
        k.gemm("lm_head", emit, s.hidden, s.vocab, s.hidden * s.vocab, 1, 5,
               Weights::kUnquantized));
  }
  // One batch runs its stages one after another (no micro-batches in flight): the layers are
  // all counted above, split over stages or not, and the sends between stages add to them.
  if (s.pp > 1) add(it, keep_ops, k.pipeline_send(m));
  it.overhead_seconds = ideal ? 0.0 : step_overhead_seconds(p, emit, s.sampler_l2_sequences);
  it.seconds = it.ops_seconds + it.overhead_seconds;
  return it;
}

IterationCost LatencyModel::iteration(const BatchShape& batch, OpDetail detail) const {
  // (The memos are by row count: a lockstep group's expert tokens take the full costing.)
  if (detail == OpDetail::kTotals && batch.moe_group_tokens == 0) {
    IterationCost it;
    // The engine's decode-only iterations (the aggregate form) come from the decode-step memo,
    // every other batch's from the row memo.
    if (batch.prefill.empty() && batch.decode.empty() && batch.decode_seqs > 0 &&
        batch.block_tokens >= 0) {
      KVSIM_CHECK(batch.decode_context_tokens >= batch.decode_seqs,
                  "decode aggregate {} seqs, {} context", batch.decode_seqs,
                  batch.decode_context_tokens);
      if (decode_step_totals(batch.decode_seqs, batch.decode_context_tokens, batch.block_tokens,
                             it)) {
        return it;
      }
    }
    if (mixed_totals(batch, it)) return it;
  }
  return cost(batch, profile_, false, detail == OpDetail::kFull);
}

IterationCost LatencyModel::lower_bound(const BatchShape& batch) const {
  return cost(batch, ideal_, true, true);
}

double LatencyModel::decode_step_seconds(int64_t num_seqs, int64_t total_context_tokens,
                                         int block_tokens) const {
  return iteration(decode_batch(num_seqs, total_context_tokens, block_tokens), OpDetail::kTotals)
      .seconds;
}

double LatencyModel::decode_step_lower_bound_seconds(int64_t num_seqs, int64_t total_context_tokens,
                                                     int block_tokens) const {
  return lower_bound(decode_batch(num_seqs, total_context_tokens, block_tokens)).seconds;
}

AffineCost LatencyModel::decode_step_affine(int64_t num_seqs, int block_tokens) const {
  KVSIM_CHECK(num_seqs >= 0, "num_seqs {}", num_seqs);
  if (num_seqs == 0) return {};
  // Everything but decode attention is independent of the context; decode attention is
  // slope * t + fixed per layer (Costing::decode_attention): b is the slope, a what remains.
  const LatencyShape& s = *shape_;
  const Costing k(s, gpu_, profile_, false);
  const double n = static_cast<double>(num_seqs);
  const double b = k.decode_slope(n, block_tokens, attention_);
  const double whole_at_min = decode_step_seconds(num_seqs, num_seqs, block_tokens);
  return {whole_at_min - b * n, b};
}

SequenceLatency sequence_latency(const LatencyModel& m, int64_t seq_len, int64_t batch,
                                 int block_tokens) {
  KVSIM_CHECK(seq_len >= 1 && batch >= 1, "seq_len {} batch {}", seq_len, batch);
  SequenceLatency r;
  r.seq_len = seq_len;
  r.batch = batch;
  BatchShape pre;
  pre.block_tokens = block_tokens;
  pre.prefill.assign(static_cast<size_t>(batch), PrefillChunk{seq_len, 0, true});
  r.prefill = m.iteration(pre);
  r.prefill_bound = m.lower_bound(pre);
  r.prefill_s = r.prefill.ops_seconds;
  r.prefill_lower_bound_s = r.prefill_bound.ops_seconds;
  r.ttft_s = r.prefill.seconds;
  r.ttft_lower_bound_s = r.prefill_bound.seconds;
  BatchShape dec;
  dec.block_tokens = block_tokens;
  dec.decode.assign(static_cast<size_t>(batch), DecodeSeq{seq_len + 1});
  r.decode = m.iteration(dec);
  r.decode_bound = m.lower_bound(dec);
  r.decode_step_s = r.decode.seconds;
  r.decode_step_lower_bound_s = r.decode_bound.seconds;
  r.decode_tokens_per_s = static_cast<double>(batch) / r.decode_step_s;
  r.decode_tokens_per_s_upper_bound = static_cast<double>(batch) / r.decode_step_lower_bound_s;
  return r;
}

}  // namespace kvsim
