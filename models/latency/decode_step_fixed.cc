#include "models/latency/decode_step_fixed.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/check.h"
#include "models/latency/latency_model.h"

namespace kvsim {

bool DecodeStepFixed::Walk::parts_hold(int64_t n) const {
  constexpr int64_t kMostSteps = int64_t{1} << 20;
  return dv_ >= 0 && n <= kMostSteps && (v_ >> kNsShift) >= 1 &&
         ((v_ + dv_ * n) >> kNsShift) < (Int128{1} << 62);
}

bool DecodeStepFixed::Walk::ends_before(int64_t* out, int64_t n, int64_t from, int64_t before,
                                        const int64_t* weights, int64_t max_weight, EndSums& sums) {
  // v_ + i·dv_ = (hi + i·dh)·2^S + lo + i·dl with 0 <= lo, dl < 2^S: step i's ns (the shift)
  // is hi + i·dh + ((lo + i·dl) >> S), with no 128-bit step (parts_hold). The durations' sum is
  // at most the exact sum of the fixed-point values over 2^S (each ns is its value rounded
  // down): n·v + dv·n(n-1)/2. When `from` plus that is before `before`, every end is; and when
  // n times it (times the largest weight) is below 2^62, the ends and both sums fit in 64 bits.
  constexpr int kS = kNsShift;
  if (n <= 0 || from < 0 || max_weight < 0 || !parts_hold(n)) return false;
  const Int128 bound = (v_ * n + dv_ * (Int128{n} * (n - 1) / 2)) >> kS;
  const Int128 last = from + bound;
  if (last >= before || last * n * std::max<int64_t>(max_weight, 1) >= (Int128{1} << 62)) {
    return false;
  }
  constexpr Int128 kLow = (Int128{1} << kS) - 1;
  auto hi = static_cast<int64_t>(v_ >> kS);
  auto lo = static_cast<uint64_t>(v_ & kLow);
  const auto dh = static_cast<int64_t>(dv_ >> kS);
  const auto dl = static_cast<uint64_t>(dv_ & kLow);
  int64_t e = from, sum = 0, weighted = 0;
  // One loop, compiled with and without the weights (a run without crossings has none).
  const auto pass = [&](auto weigh) {
#pragma GCC unroll 4
    for (int64_t i = 0; i < n; ++i) {
      e += hi + static_cast<int64_t>(lo >> kS);
      sum += e;
      if constexpr (decltype(weigh)::value) weighted += weights[i] * e;
      out[i] = e;
      hi += dh;
      lo += dl;
    }
  };
  if (weights != nullptr) {
    pass(std::true_type{});
  } else {
    pass(std::false_type{});
  }
  v_ += dv_ * n;
  sums = {sum, weighted};
  return true;
}

Int128 flops_to_fixed(double flops) {
  return static_cast<Int128>(
      std::roundl(std::ldexp(static_cast<long double>(flops), DecodeStepFixed::kFlopsShift)));
}

DecodeStepFixed LatencyModel::decode_step_fixed(int64_t num_seqs, int block_tokens) const {
  KVSIM_CHECK(num_seqs >= 1, "num_seqs {}", num_seqs);
  const auto n = static_cast<size_t>(num_seqs);
  const auto memo = [&]() -> DecodeStepMemo* {
    return n < decode_memo_.size() && decode_memo_[n].block_tokens == block_tokens
               ? &decode_memo_[n]
               : nullptr;
  };
  if (const DecodeStepMemo* m = memo(); m != nullptr && m->has_fixed) return m->fixed;
  // The duration's line from decode_step_affine; the FLOPs' from two costings far apart (FLOPs
  // are affine in T too: decode attention's scale with it, every other operation's with n only).
  // Both cost decode-only batches of n, which builds the memo entry for (n, block_tokens).
  DecodeStepFixed f;
  const AffineCost ab = decode_step_affine(num_seqs, block_tokens);
  const auto fixed = [](long double v, int shift) {
    return static_cast<Int128>(std::roundl(std::ldexp(v, shift)));
  };
  f.ns_a = fixed(static_cast<long double>(ab.a) * 1e9L, DecodeStepFixed::kNsShift);
  f.ns_b = fixed(static_cast<long double>(ab.b) * 1e9L, DecodeStepFixed::kNsShift);
  constexpr int64_t kSpan = int64_t{1} << 20;
  const auto flops_at = [&](int64_t t) {
    BatchShape b;
    b.block_tokens = block_tokens;
    b.decode_seqs = num_seqs;
    b.decode_context_tokens = t;
    return static_cast<long double>(iteration(b, OpDetail::kTotals).flops);
  };
  const long double f0 = flops_at(num_seqs);
  const long double slope = (flops_at(num_seqs + kSpan) - f0) / static_cast<long double>(kSpan);
  f.flops_b = fixed(slope, DecodeStepFixed::kFlopsShift);
  f.flops_a = fixed(f0 - slope * static_cast<long double>(num_seqs), DecodeStepFixed::kFlopsShift);
  if (DecodeStepMemo* m = memo(); m != nullptr) {  // past the memo's range: computed each time
    m->fixed = f;
    m->has_fixed = true;
  }
  return f;
}

}  // namespace kvsim
