// The attention operations of the costing (Costing, costing.h): prefill attention (flash or
// eager) over a batch's chunks and decode attention as its affine terms in the total context.
#include "models/latency/costing.h"
#include "models/latency/flash_tiles.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvsim {

OpCost decode_attention_at(const DecodeTerms& d, double n, double t, double layers, bool ideal) {
  OpCost o;
  o.name = "attention_decode";
  o.op_class = OpClass::kAttentionDecode;
  const DecodeAttentionTotals a = decode_attention_totals(d, n, t, layers);
  o.flops = a.flops;
  o.bytes = a.bytes;
  o.compute_s = o.flops / d.r.flops_per_s;
  o.memory_s = (d.kv_per_token * (t + d.floor_tokens) + d.qo_bytes) * layers / d.r.bytes_per_s;
  o.overhead_s = (n > 0 ? d.r.launch_s : 0.0) * layers;
  o.seconds = ideal ? std::max(o.compute_s, o.memory_s)  // the exact roofline
                    : a.seconds;
  o.bound = o.compute_s >= o.memory_s ? Bound::kCompute : Bound::kMemory;
  return o;
}

double Costing::causal_pairs(double q, double ctx) const {
  const double full = q * ctx + q * (q + 1) / 2;
  const double w = s_.window;
  if (w <= 0 || ctx + q <= w) return full;
  if (ctx + 1 >= w) return q * w;
  // Queries 0 .. w - ctx - 1 see ctx + 1 .. w keys; the other q - (w - ctx) see w each.
  const double grow = w - ctx;
  return grow * ctx + grow * (grow + 1) / 2 + (q - grow) * w;
}

double Costing::flash_head_dim_curve() const {
  // pow(1, y) is 1 for every y: most models' head dimension is 128 or more.
  const double base = std::min(1.0, s_.head_dim / 128.0);
  return base == 1.0 ? 1.0 : std::pow(base, p_.flash_head_dim_exponent);
}

OpCost Costing::varlen_attention(const std::vector<PrefillChunk>& chunks, double n_decode,
                                 double decode_context) const {
  const OpClass c = OpClass::kAttentionFlash;
  const double sms = std::max(1, g_.sm_count);
  const FlashTileWork w =
      flash_tile_work(chunks, n_decode, n_decode > 0 ? decode_context / n_decode : 0, s_.q_heads,
                      s_.head_dim, static_cast<int>(sms), s_.window);
  // Useful work and traffic: Q read and O written, K and V of every key read once.
  double pairs = 0, bytes = 0, chunk_keys = 0;
  for (const PrefillChunk& ch : chunks) {
    const double q = static_cast<double>(ch.tokens), ctx = static_cast<double>(ch.context_tokens);
    const double keys = s_.window > 0 ? std::min(ctx + q, s_.window - 1 + q) : ctx + q;
    pairs += causal_pairs(q, ctx);
    chunk_keys += keys;
    bytes += 2.0 * q * s_.q_heads * s_.head_dim * kActBytes;
  }
  pairs += decode_context;
  bytes += 2.0 * n_decode * s_.q_heads * s_.head_dim * kActBytes +
           2.0 * chunk_keys * s_.kv_heads * s_.head_dim * s_.kvb;
  const double kv_token_bytes = 2.0 * s_.head_dim * s_.kvb;  // K and V of one token, one KV head
  const double decode_kv =
      decode_context * s_.kv_heads * kv_token_bytes *
      (1.0 +
       decode_kv_rereads(w.ctas / s_.q_heads, sms, (decode_context + chunk_keys) * kv_token_bytes));
  const Rates r = rates(c, 0.0);
  // A whole tile's FLOPs (QK^T and PV over kBlockM rows and kBlockN keys) at one SM's share.
  const double tile_flops = 4.0 * kFlashBlockM * flash_block_n(s_.head_dim) * s_.head_dim;
  const double compute =
      w.waves * p_.flash_tiles.wave_overhead_s + w.wave_blocks * tile_flops / (r.flops_per_s / sms);
  OpCost o;
  o.name = "attention_prefill";
  o.op_class = c;
  o.flops = 4.0 * s_.head_dim * s_.q_heads * pairs * s_.layers;
  o.compute_s = compute * s_.layers;
  // The decodes' KV streams at the rate the decode-only kernels reach (the decode class's).
  o.memory_s =
      (bytes / r.bytes_per_s + decode_kv / rates(OpClass::kAttentionDecode, 0.0).bytes_per_s) *
      s_.layers;
  o.bytes = (bytes + decode_kv) * s_.layers;
  o.overhead_s = r.launch_s * s_.layers;
  o.seconds = std::max(o.compute_s, o.memory_s) + o.overhead_s;
  o.bound = o.compute_s >= o.memory_s ? Bound::kCompute : Bound::kMemory;
  return o;
}

double Costing::decode_kv_rereads(double ctas_per_head, double sms, double head_kv_bytes) const {
  // Without GQA packing (a varlen batch) each of a KV head's g query heads reads a decode's KV
  // itself. FA2's grid runs query blocks fastest, then sequences, then heads, so the g CTAs of
  // one decode are ctas_per_head apart: within one wave of `sms` CTAs they share the KV as it
  // streams; further apart, a later head finds it in L2 only as far as one head's KV of the whole
  // batch fits there (misses 1 - L2 / bytes: replacement that keeps no order).
  const double g = s_.q_heads / s_.kv_heads;
  const double l2 = static_cast<double>(g_.l2_bytes);
  if (g <= 1 || (g - 1) * ctas_per_head < sms || head_kv_bytes <= l2 || l2 <= 0) return 0;
  return (g - 1) * (1.0 - l2 / head_kv_bytes);
}

OpCost Costing::prefill_attention(const std::vector<PrefillChunk>& chunks, AttentionKind impl,
                                  double n_decode, double decode_context) const {
  if (varlen_tiles(impl)) return varlen_attention(chunks, n_decode, decode_context);
  const OpClass c =
      impl == AttentionKind::kFlash ? OpClass::kAttentionFlash : OpClass::kAttentionNative;
  OpCost total;
  total.name = "attention_prefill";
  total.op_class = c;
  // Flash's curve: keys / (keys + flash_seq_half_tokens) x the head-dimension factor.
  const double head_dim_curve =
      impl == AttentionKind::kFlash && !ideal_ ? flash_head_dim_curve() : 1.0;
  const ClassTables class_tables = tables(c);
  for (const PrefillChunk& ch : chunks) {
    const double q = static_cast<double>(ch.tokens);
    const double ctx = static_cast<double>(ch.context_tokens);
    // Keys the chunk reads: the last query's and those before it; with a sliding window, only
    // those inside some query's window (positions ctx - window + 1 onwards).
    const double keys = s_.window > 0 ? std::min(ctx + q, s_.window - 1 + q) : ctx + q;
    // Q read + O written, K and V of every key read once.
    double bytes = 2.0 * q * s_.q_heads * s_.head_dim * kActBytes +
                   2.0 * keys * s_.kv_heads * s_.head_dim * s_.kvb;
    // FLOPs per query-key pair and head: QK^T and PV, 2 FLOPs per MAC.
    double pair_flops = 4.0 * s_.head_dim;
    double expand_flops = 0;
    if (s_.kv_lora > 0) {
      // MLA prefill (vLLM MLACommonImpl, forward_prefill): kv_b_proj expands every key's
      // latent into per-head K (qk_nope) and V, which are written and read back; attention is
      // then multi-head with head sizes qk (Q, K) and v (V, O).
      const double expanded = s_.q_heads * (s_.head_dim - s_.rope_dim + s_.v_head_dim);
      bytes = q * s_.q_heads * (s_.head_dim + s_.v_head_dim) * kActBytes +
              keys * s_.kv_elems * s_.kvb + s_.kv_lora * expanded * s_.wb +
              2.0 * keys * expanded * kActBytes;
      pair_flops = 2.0 * (s_.head_dim + s_.v_head_dim);
      expand_flops = 2.0 * keys * s_.kv_lora * expanded;
    }
    double flops = 0;
    double curve = 1.0;
    if (impl == AttentionKind::kFlash) {
      // Causal: query i of the chunk sees ctx + i + 1 keys (at most the window); masked tiles
      // are skipped.
      const double pairs = causal_pairs(q, ctx);
      flops = s_.kv_lora > 0 ? pair_flops * s_.q_heads * pairs + expand_flops
                             : 4.0 * s_.head_dim * s_.q_heads * pairs;
      if (!ideal_) curve = keys / (keys + p_.flash_seq_half_tokens) * head_dim_curve;
    } else {
      // Eager attention computes the whole q x keys rectangle, then masks it, and moves the
      // score matrix through HBM native_score_passes times.
      const double scores = s_.q_heads * q * keys;
      flops = s_.kv_lora > 0 ? pair_flops * scores + expand_flops : 4.0 * s_.head_dim * scores;
      bytes += p_.native_score_passes * p_.native_score_bytes * scores;
    }
    const OpCost one = op("", c, flops, bytes, 0, s_.layers, rates(c, class_tables, keys, curve));
    accumulate(total, one);
  }
  // Launches per layer for the whole batch: one varlen flash kernel covers every chunk; eager
  // attention runs batched QK^T, masked softmax and PV (3 kernels).
  const double kernels = impl == AttentionKind::kFlash ? 1 : 3;
  const double launch = kernels * rates(c, class_tables, 0).launch_s * s_.layers;
  total.overhead_s += launch;
  total.seconds += launch;
  total.bound = total.compute_s >= total.memory_s ? Bound::kCompute : Bound::kMemory;
  return total;
}

DecodeTerms Costing::decode_terms(double n, int block_tokens, AttentionKind impl) const {
  const OpClass c = OpClass::kAttentionDecode;
  double block_curve = 1.0;
  if (!ideal_ && block_tokens > 0) {
    block_curve = block_tokens / (block_tokens + p_.paged_block_half_tokens);
  }
  const EfficiencyTable* tm = p_.table(c, TableMetric::kMemoryEfficiency);
  const double axis = tm && tm->axis == TableAxis::kBlockSize ? block_tokens : n;
  DecodeTerms d{};
  d.r = rates(c, axis, 1.0, block_curve);
  // Bytes per context token: its K and V; eager attention also moves its score.
  d.kv_per_token = 2.0 * s_.kv_heads * s_.head_dim * s_.kvb;
  if (impl == AttentionKind::kNative) {
    d.kv_per_token += p_.native_score_passes * p_.native_score_bytes * s_.q_heads;
  }
  d.flops_per_token = 4.0 * s_.head_dim * s_.q_heads;
  d.qo_bytes = n * 2.0 * s_.q_heads * s_.head_dim * kActBytes;
  d.flops_fixed = 0;
  if (s_.kv_lora > 0) {
    // MLA decode with the up-projections absorbed (vLLM MLACommonImpl, forward_decode): every
    // head's query is taken into the latent (q_nope x W_UK), attends over the one latent plus
    // rotary key as multi-query attention (QK over kv_lora + rope, PV over kv_lora), and its
    // latent output leaves through W_UV. Per context token: the latent once for all heads.
    // Per sequence: the two absorptions and their weights (kv_b_proj, read once a step).
    const double latent = s_.kv_lora + s_.rope_dim;
    const double nope = s_.head_dim - s_.rope_dim;
    d.kv_per_token = s_.kv_elems * s_.kvb;
    if (impl == AttentionKind::kNative) {
      d.kv_per_token += p_.native_score_passes * p_.native_score_bytes * s_.q_heads;
    }
    d.flops_per_token = 2.0 * s_.q_heads * (latent + s_.kv_lora);
    d.qo_bytes = n * s_.q_heads * (latent + s_.kv_lora) * kActBytes +
                 (n > 0 ? s_.kv_lora * s_.q_heads * (nope + s_.v_head_dim) * s_.wb : 0.0);
    d.flops_fixed = 2.0 * n * s_.q_heads * s_.kv_lora * (nope + s_.v_head_dim);
  }
  d.floor_tokens = ideal_ ? 0.0 : n * p_.decode_context_half_tokens;
  d.slope = std::max(d.flops_per_token / d.r.flops_per_s, d.kv_per_token / d.r.bytes_per_s);
  d.fixed = (d.kv_per_token * d.floor_tokens + d.qo_bytes) / d.r.bytes_per_s;
  if (d.flops_fixed > 0) d.fixed += d.flops_fixed / d.r.flops_per_s;
  return d;
}

OpCost Costing::decode_attention(double n, double t, int block_tokens, AttentionKind impl,
                                 bool mixed) const {
  DecodeTerms d = decode_terms(n, block_tokens, impl);
  if (mixed) d = mixed_terms(d, p_, ideal_);
  return decode_attention_at(d, n, t, s_.layers, ideal_);
}

}  // namespace kvsim
