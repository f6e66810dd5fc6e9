// LatencyModel's memos (docs/latency.md): the decode-step memo and the row and LM-head memos
// of mixed batches, caches of a pure function that add the same operations in the full
// costing's order, so they give the same bits.
#include <algorithm>
#include <array>
#include <cstdint>

#include "core/check.h"
#include "models/latency/costing.h"
#include "models/latency/latency_model.h"
#include "models/latency/latency_shape.h"
#include "models/latency/sampler_cost.h"

namespace kvsim {

namespace {

// Decode-only memos cover batches of up to this many sequences (larger ones are costed afresh).
constexpr size_t kDecodeMemoMaxSeqs = size_t{1} << 14;

// Decode attention's terms as a decode-step memo keeps them.
DecodeTerms memo_terms(const DecodeStepMemo& m) {
  const std::array<double, 10>& a = m.attention;
  return {{a[0], a[1], a[2]}, a[3], a[4], a[5], a[6], a[7], a[8], a[9]};
}

// Row memo sizes: how many operations follow attention at most (o_proj, allreduce, router,
// mlp_gate_up, mlp_down, norm_act_residual, pp_send), and the row counts kept (as the GEMM memo).
constexpr int kRowMaxPostOps = 10;
constexpr int64_t kRowMemoMaxRows = static_cast<int64_t>(kGemmMemoMaxRows);

// add()'s sums for one operation's (seconds, flops, bytes), in add()'s rule: no work, no add.
void add_totals(IterationCost& it, double seconds, double flops, double bytes) {
  if (flops == 0 && bytes == 0) return;
  it.ops_seconds += seconds;
  it.flops += flops;
  it.bytes += bytes;
}

}  // namespace

bool LatencyModel::mixed_totals(const BatchShape& batch, IterationCost& out) const {
  const BatchRows r = batch_rows(batch, model_);
  IterationCost& it = out;
  it = IterationCost{};
  if (r.m == 0) return true;  // cost()'s empty batch
  const auto rows = static_cast<int64_t>(r.m);
  if (rows > kRowMemoMaxRows) return false;
  // The row memo's collectives are the decode steps' (graph); V0 runs a prefill's eagerly.
  if (comm_eager_ != nullptr && !batch.prefill.empty()) return false;
  // Attention, the only operations that depend on more than the row counts.
  const Costing k(*shape_, gpu_, profile_, false);
  std::array<double, 3> prefill{}, decode{};  // (seconds, flops, bytes)
  const bool varlen = !batch.prefill.empty() && k.varlen_tiles(attention_);
  if (!batch.prefill.empty()) {
    const OpCost a =
        k.prefill_attention(batch.prefill, attention_, varlen ? r.n : 0, varlen ? r.t : 0);
    prefill = {a.seconds, a.flops, a.bytes};
  }
  if (r.n > 0 && !varlen) {
    // Its terms depend on n and the block size only: the decode-step memo's.
    const DecodeStepMemo* d = decode_step_memo(static_cast<int64_t>(r.n), batch.block_tokens);
    DecodeTerms terms =
        d != nullptr ? memo_terms(*d) : k.decode_terms(r.n, batch.block_tokens, attention_);
    if (!batch.prefill.empty()) terms = mixed_terms(terms, profile_, false);
    const DecodeAttentionTotals a = decode_attention_totals(terms, r.n, r.t, shape_->layers);
    decode = {a.seconds, a.flops, a.bytes};
  }
  const double* row = row_ops(rows);
  if (row == nullptr) return false;
  const std::array<double, 3>* head = r.emit > 0 ? &head_op(static_cast<int64_t>(r.emit)) : nullptr;
  // cost()'s additions, in its order: the operations before attention (summed from 0, as it
  // sums them), prefill and decode attention, the operations after them with the LM head in its
  // place. add_totals skips what add() skips (an empty attention of zero work).
  it.ops_seconds = row[0];
  it.flops = row[1];
  it.bytes = row[2];
  if (!batch.prefill.empty()) add_totals(it, prefill[0], prefill[1], prefill[2]);
  if (r.n > 0 && !varlen) add_totals(it, decode[0], decode[1], decode[2]);
  const double* o = row + 3;
  for (int i = 0; i < row_head_at_; ++i, o += 3) add_totals(it, o[0], o[1], o[2]);
  if (head != nullptr) add_totals(it, (*head)[0], (*head)[1], (*head)[2]);
  for (int i = row_head_at_; i < row_post_ops_; ++i, o += 3) add_totals(it, o[0], o[1], o[2]);
  it.overhead_seconds = step_overhead_seconds(profile_, r.emit, shape_->sampler_l2_sequences);
  it.seconds = it.ops_seconds + it.overhead_seconds;
  return true;
}

const double* LatencyModel::row_ops(int64_t rows) const {
  if (rows < 1 || rows > kRowMemoMaxRows) return nullptr;
  const auto m = static_cast<size_t>(rows);
  if (row_post_ops_ >= 0) {
    const size_t stride = 3 + 3 * static_cast<size_t>(row_post_ops_);
    if (m < row_memo_.size() / stride && row_memo_[m * stride] >= 0) return &row_memo_[m * stride];
  }
  // Cost one chunk of `rows` tokens in full once (attention aside, every operation depends on the
  // row count alone; it emits a token, so the LM head's place is known) and keep the sums
  // cost() forms: those before attention as partial sums, those after it one by one.
  BatchShape b;
  b.prefill.push_back(PrefillChunk{rows, 0, true});
  const IterationCost full = cost(b, profile_, false, true);
  std::array<double, 3 + 3 * kRowMaxPostOps> v{};
  int post = 0, head_at = -1;
  bool after = false;
  for (const OpCost& o : full.ops) {
    if (o.op_class == OpClass::kAttentionFlash || o.op_class == OpClass::kAttentionNative) {
      after = true;
    } else if (!after) {
      v[0] += o.seconds;
      v[1] += o.flops;
      v[2] += o.bytes;
    } else if (o.name == "lm_head") {
      head_at = post;
    } else {
      if (post == kRowMaxPostOps) return nullptr;  // not cost()'s operations: cost in full
      const auto i = static_cast<size_t>(3 + 3 * post++);
      v[i] = o.seconds;
      v[i + 1] = o.flops;
      v[i + 2] = o.bytes;
    }
  }
  // Every row count has the same operations; were one to differ, its batches cost in full.
  if (!after || head_at < 0) return nullptr;
  if (row_post_ops_ < 0) {
    row_post_ops_ = post;
    row_head_at_ = head_at;
  }
  if (post != row_post_ops_ || head_at != row_head_at_) return nullptr;
  const size_t stride = 3 + 3 * static_cast<size_t>(post);
  // Grown to the largest row count seen (the vector's capacity grows geometrically; the pages
  // past its size stay untouched).
  if (m >= row_memo_.size() / stride) row_memo_.resize((m + 1) * stride, -1.0);
  double* out = &row_memo_[m * stride];
  std::copy_n(v.begin(), stride, out);
  return out;
}

const std::array<double, 3>& LatencyModel::head_op(int64_t emit) const {
  const auto e = static_cast<size_t>(emit);
  if (e >= head_memo_.size()) head_memo_.resize(e + 1, {-1.0, 0.0, 0.0});
  std::array<double, 3>& h = head_memo_[e];
  if (h[0] >= 0) return h;
  // Cost `emit` decode sequences in full once: all their rows pass the LM head.
  BatchShape b;
  b.decode_seqs = emit;
  b.decode_context_tokens = emit;
  const IterationCost full = cost(b, profile_, false, true);
  for (const OpCost& o : full.ops) {
    if (o.name == "lm_head") h = {o.seconds, o.flops, o.bytes};
  }
  KVSIM_CHECK(h[0] >= 0, "head memo: no lm_head among {} ops", full.ops.size());
  return h;
}

const DecodeStepMemo* LatencyModel::decode_step_memo(int64_t n, int block_tokens) const {
  if (static_cast<size_t>(n) >= kDecodeMemoMaxSeqs) return nullptr;
  if (decode_memo_.size() <= static_cast<size_t>(n)) {
    decode_memo_.resize(
        std::min(kDecodeMemoMaxSeqs, std::max<size_t>(64, 2 * static_cast<size_t>(n))));
  }
  DecodeStepMemo& m = decode_memo_[static_cast<size_t>(n)];
  if (m.block_tokens != block_tokens) {
    // Cost the batch in full once (the context is irrelevant to every operation but decode
    // attention) and keep what the additions around decode attention need, summed the same way.
    BatchShape b;
    b.block_tokens = block_tokens;
    b.decode_seqs = n;
    b.decode_context_tokens = n;
    const IterationCost full = cost(b, profile_, false, true);
    m = DecodeStepMemo{};
    m.block_tokens = block_tokens;
    bool after = false;
    for (const OpCost& o : full.ops) {
      if (o.op_class == OpClass::kAttentionDecode) {
        after = true;
      } else if (!after) {
        m.pre_seconds += o.seconds;
        m.pre_flops += o.flops;
        m.pre_bytes += o.bytes;
      } else {
        KVSIM_CHECK(m.post_count < static_cast<int>(m.post_seconds.size()), "decode memo: {} ops",
                    full.ops.size());
        const auto i = static_cast<size_t>(m.post_count++);
        m.post_seconds[i] = o.seconds;
        m.post_flops[i] = o.flops;
        m.post_bytes[i] = o.bytes;
      }
    }
    KVSIM_CHECK(after, "decode memo: no decode attention among {} ops", full.ops.size());
    const LatencyShape& s = *shape_;
    m.layers = s.layers;
    const Costing k(s, gpu_, profile_, false);
    const DecodeTerms d = k.decode_terms(static_cast<double>(n), block_tokens, attention_);
    m.attention = {d.r.flops_per_s,   d.r.bytes_per_s, d.r.launch_s,   d.kv_per_token,
                   d.flops_per_token, d.qo_bytes,      d.floor_tokens, d.slope,
                   d.fixed,           d.flops_fixed};
  }
  return &m;
}

bool LatencyModel::decode_step_totals(int64_t n, int64_t t, int block_tokens,
                                      IterationCost& out) const {
  const DecodeStepMemo* memo = decode_step_memo(n, block_tokens);
  if (memo == nullptr) return false;
  const DecodeStepMemo& m = *memo;
  const DecodeTerms d = memo_terms(m);
  // cost()'s additions, in its order: the operations before decode attention, decode
  // attention, the operations after it.
  IterationCost& it = out;
  it = IterationCost{};
  it.ops_seconds = m.pre_seconds;
  it.flops = m.pre_flops;
  it.bytes = m.pre_bytes;
  // t as cost() forms it: an integer below 2^53 converted exactly.
  const DecodeAttentionTotals a =
      decode_attention_totals(d, static_cast<double>(n), static_cast<double>(t), m.layers);
  if (a.flops != 0 || a.bytes != 0) {  // add()'s rule
    it.ops_seconds += a.seconds;
    it.flops += a.flops;
    it.bytes += a.bytes;
  }
  for (size_t i = 0; i < static_cast<size_t>(m.post_count); ++i) {
    it.ops_seconds += m.post_seconds[i];
    it.flops += m.post_flops[i];
    it.bytes += m.post_bytes[i];
  }
  it.overhead_seconds =
      step_overhead_seconds(profile_, static_cast<double>(n), shape_->sampler_l2_sequences);
  it.seconds = it.ops_seconds + it.overhead_seconds;
  return true;
}

}  // namespace kvsim
