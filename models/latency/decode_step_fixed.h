// A decode-only step's duration and FLOPs as exact integer functions of the batch's context sum
// (DecodeStepFixed), which the engine steps and fast-forwards with; LatencyModel builds them
// (decode_step_fixed).
#pragma once

#include <cstdint>

#include "core/int128.h"

namespace kvsim {

// A decode-only step as exact integer functions of the batch's context sum T, for a fixed batch
// size n and block size: its duration in ns and its FLOPs, both affine in T (decode_step_affine),
// with coefficients in fixed point. The engine times every decode-only step with it, stepping
// and fast-forward alike, so a step's duration is one integer function of (n, T), and the sums
// the recorder keeps over k steps are exact integers whatever order (or closed form) adds them
// (docs/latency.md, "Decode is affine in the total context").
struct DecodeStepFixed {
  static constexpr int kNsShift = 40;    // duration coefficients in units of 2^-40 ns
  static constexpr int kFlopsShift = 8;  // FLOPs in units of 2^-8 (Recorder::on_batch)
  Int128 ns_a = 0, ns_b = 0;             // ns x 2^40 at T = 0, and per token of T
  Int128 flops_a = 0, flops_b = 0;       // FLOPs x 2^8 at T = 0, and per token of T
  // a + b T rounded to the nearest ns (ties up), at least 1 ns as every iteration.
  int64_t duration_ns(int64_t t) const { return rounded_ns(ns_a + ns_b * t + kHalfNs); }
  // duration_ns(t0), duration_ns(t0 + dt), duration_ns(t0 + 2 dt), ...: one addition a step
  // (a decode run's steps, whose context grows by the batch size each).
  class Walk {
   public:
    Walk() = default;
    Walk(const DecodeStepFixed& s, int64_t t0, int64_t dt)
        : v_(s.ns_a + s.ns_b * t0 + kHalfNs), dv_(s.ns_b * dt) {}
    int64_t ns() const { return rounded_ns(v_); }
    void next() { v_ += dv_; }
    // The duration `j` steps on: duration_ns(t0 + j dt), without walking there.
    int64_t ns_at(int64_t j) const { return rounded_ns(v_ + dv_ * j); }
    // A decode run's pass: the ends of the next `n` steps counted from `from` (from + d_0,
    // from + d_0 + d_1, ...) into out[0..n) when an upper bound on them shows that all come
    // before `before`; then the walk moves on `n` steps, `sums` gets the ends' sum and, with
    // `weights` (n of them, each in [0, max_weight]), Σ weights[i]·end_i, and it returns true.
    // Else false, nothing written and the walk where it was: the caller goes step by step.
    struct EndSums {
      int64_t ends = 0;
      int64_t weighted = 0;
    };
    bool ends_before(int64_t* out, int64_t n, int64_t from, int64_t before, const int64_t* weights,
                     int64_t max_weight, EndSums& sums);

   private:
    // Whether the next n steps' ns come exactly from 64-bit parts: the steps never shorten (so
    // no clamp is needed past a first step of at least 1 ns), and neither part can overflow
    // (lo + i·dl < (n + 1)·2^S; hi, advanced n times, stays below the value n steps on).
    bool parts_hold(int64_t n) const;
    Int128 v_ = kHalfNs, dv_ = 0;
  };
  Int128 flops_fixed(int64_t t) const { return flops_a + flops_b * t; }

 private:
  static constexpr Int128 kHalfNs = Int128{1} << (kNsShift - 1);
  static int64_t rounded_ns(Int128 v) {
    const auto ns = static_cast<int64_t>(v >> kNsShift);
    return ns > 1 ? ns : 1;
  }
};
// FLOPs in DecodeStepFixed's fixed point, rounded (any iteration's).
Int128 flops_to_fixed(double flops);

}  // namespace kvsim
