#include "validate/kernel_model.h"

#include <algorithm>

#include "core/check.h"
#include "models/latency/costing.h"
#include "models/latency/latency_model.h"
#include "validate/grid.h"

namespace kvsim::validate {

namespace {

// Elements per row of the synthetic copy: the model's embedding reads rows of `hidden` weights
// and writes rows of `hidden` activations, 2 bytes each, so a copy of `bytes` is bytes/1024 rows.
constexpr int kCopyRowElements = 512;
// The attention-kind slot of a copy's model shape: its model costs bytes only (the embedding's
// own small-index loads are not the case's; the case's latency terms are added apart).
constexpr int kCopyShape = -1;

// The model's element type is the case's: an fp32 case reads and writes 4-byte weights, KV and
// activations, as a float32 model's forward pass does.
DType model_dtype(kernels::Precision p) {
  switch (p) {
    case kernels::Precision::kFp16: return DType::kFp16;
    case kernels::Precision::kBf16: return DType::kBf16;
    case kernels::Precision::kFp32: return DType::kFp32;
  }
  return DType::kFp16;
}

ModelSpec one_layer(int heads, int kv_heads, int head_dim, int hidden, kernels::Precision p) {
  ModelSpec m;
  m.name = "kernel";
  m.layers = 1;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = head_dim;
  m.hidden = hidden;
  m.ffn = 1;
  m.vocab = 1;
  m.weight_dtype = model_dtype(p);
  m.kv_dtype = model_dtype(p);
  return m;
}

OpCost op_cost(const LatencyModel& lm, const BatchShape& b, std::string_view name) {
  const IterationCost it = lm.iteration(b);
  for (const OpCost& o : it.ops) {
    if (o.name == name) return o;
  }
  KVSIM_CHECK(false, "the latency model reported no '{}' operation", name);
  return {};
}

double op_seconds(const LatencyModel& lm, const BatchShape& b, std::string_view name) {
  return op_cost(lm, b, name).seconds;
}

}  // namespace

std::optional<OpClass> model_class(const KernelCase& c) {
  if (!modelled_kind(c)) return std::nullopt;
  switch (c.kind) {
    case KernelClass::kNative: return OpClass::kAttentionNative;
    case KernelClass::kFlash: return OpClass::kAttentionFlash;
    case KernelClass::kPagedDecode: return OpClass::kAttentionDecode;
    case KernelClass::kGemm: return OpClass::kGemm;
    case KernelClass::kMembwCopy: return OpClass::kElementwise;
    case KernelClass::kMembwRead: return std::nullopt;
  }
  return std::nullopt;
}

const LatencyModel& KernelPredictor::model(const Shape& s) const {
  auto it = models_.find(s);
  if (it == models_.end()) {
    const auto precision = static_cast<kernels::Precision>(s[4]);
    Profile p = profile_;
    if (s[5] == kCopyShape) p.elementwise_cta_s = p.elementwise_serial_load_s = 0;
    const int kind = s[5] == kCopyShape ? static_cast<int>(AttentionKind::kFlash) : s[5];
    it = models_
             .try_emplace(s, one_layer(s[0], s[1], s[2], s[3], precision), gpu_, p,
                          static_cast<AttentionKind>(kind))
             .first;
  }
  return it->second;
}

std::optional<double> KernelPredictor::seconds(const KernelCase& c) const {
  if (!model_class(c)) return std::nullopt;
  auto i = [](int64_t v) { return static_cast<int>(v); };
  const int precision = static_cast<int>(c.precision);
  const int flash = static_cast<int>(AttentionKind::kFlash);
  BatchShape b;
  switch (c.kind) {
    case KernelClass::kNative:
    case KernelClass::kFlash: {
      const auto& a = c.attn;
      const auto kind =
          c.kind == KernelClass::kFlash ? AttentionKind::kFlash : AttentionKind::kNative;
      const LatencyModel& lm = model({i(a.heads), i(a.kv_heads), i(a.head_dim),
                                      i(a.heads * a.head_dim), precision, static_cast<int>(kind)});
      b.prefill.assign(static_cast<size_t>(a.batch),
                       PrefillChunk{a.seq_q, a.seq_kv - a.seq_q, true});
      return op_seconds(lm, b, "attention_prefill");
    }
    case KernelClass::kPagedDecode: {
      const auto& d = c.paged;
      // A fused kernel: no score traffic (the flash implementation).
      const LatencyModel& lm = model(
          {i(d.heads), i(d.kv_heads), i(d.head_dim), i(d.heads * d.head_dim), precision, flash});
      b.decode.assign(static_cast<size_t>(d.batch), DecodeSeq{d.context});
      b.block_tokens = i(d.block_size);
      return op_seconds(lm, b, "attention_decode");
    }
    case KernelClass::kGemm: {
      const LatencyModel& lm = model({1, 1, i(c.gemm.k), i(c.gemm.n), precision, flash});
      b.prefill.push_back(PrefillChunk{c.gemm.m, 0, false});
      return op_seconds(lm, b, "o_proj");
    }
    case KernelClass::kMembwCopy: {
      const LatencyModel& lm = model({1, 1, 64, kCopyRowElements, precision, kCopyShape});
      b.prefill.push_back(
          PrefillChunk{std::max<int64_t>(1, c.bytes / (2 * kCopyRowElements)), 0, false});
      const OpCost o = op_cost(lm, b, "embedding");
      if (c.ctas == 0 && c.serial_loads == 0) return o.seconds;
      // The kernel's latency terms raise its floor (costing.h, Costing::elementwise).
      const double latency = elementwise_latency_s(profile_, gpu_, c.ctas, c.serial_loads);
      const double body =
          std::max(o.seconds - o.overhead_s, profile_.elementwise_floor_s + latency);
      return body + o.overhead_s;
    }
    case KernelClass::kMembwRead: break;
  }
  return std::nullopt;
}

std::optional<double> predict_seconds(const KernelCase& c, const GpuSpec& gpu, const Profile& p) {
  return KernelPredictor(gpu, p).seconds(c);
}

}  // namespace kvsim::validate
