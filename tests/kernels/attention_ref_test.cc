#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/errors.h"
#include "kernels/cpu_ref/attention_ref.h"
#include "kernels/cpu_ref/random_inputs.h"
#include "kernels/cpu_ref/tolerance.h"

using namespace kvsim::kernels;

namespace {

// The textbook formula, written as plainly as possible and independently of attention_reference:
// softmax over the visible keys of q.k/sqrt(d), then the weighted sum of v.
std::vector<float> naive_loops(const AttentionShape& s, const std::vector<float>& q,
                               const std::vector<float>& k, const std::vector<float>& v) {
  std::vector<float> o(q.size());
  const int64_t D = s.head_dim;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seq_q; ++i) {
        const int64_t kvh = h * s.kv_heads / s.heads;
        std::vector<double> w;
        for (int64_t j = 0; j < s.seq_kv; ++j) {
          if (s.causal && j > i + s.seq_kv - s.seq_q) break;
          double dot = 0;
          for (int64_t c = 0; c < D; ++c)
            dot += q[((b * s.heads + h) * s.seq_q + i) * D + c] *
                   double(k[((b * s.kv_heads + kvh) * s.seq_kv + j) * D + c]);
          w.push_back(std::exp(dot / std::sqrt(double(D))));
        }
        double total = 0;
        for (double x : w) total += x;
        for (int64_t c = 0; c < D; ++c) {
          double acc = 0;
          for (size_t j = 0; j < w.size(); ++j)
            acc += w[j] * v[((b * s.kv_heads + kvh) * s.seq_kv + int64_t(j)) * D + c];
          o[((b * s.heads + h) * s.seq_q + i) * D + c] = float(acc / total);
        }
      }
  return o;
}

struct Inputs {
  std::vector<float> q, k, v;
};

Inputs make_inputs(const AttentionShape& s, Precision p, uint64_t seed) {
  InputRng rng(seed);
  Inputs in;
  in.q = random_values(rng, s.q_elements(), p);
  in.k = random_values(rng, s.kv_elements(), p);
  in.v = random_values(rng, s.kv_elements(), p);
  return in;
}

AttentionShape random_shape(InputRng& rng) {
  AttentionShape s;
  s.batch = 1 + rng.below(2);
  s.kv_heads = 1 + rng.below(2);
  s.heads = s.kv_heads * (1 + rng.below(3));  // MHA, GQA-2, GQA-3
  s.head_dim = rng.below(2) ? 64 : 128;
  s.causal = rng.below(2) == 1;
  s.seq_q = 1 + rng.below(90);  // crosses the 64-row tile, not a multiple of it
  s.seq_kv = s.causal ? s.seq_q + rng.below(40) : 1 + rng.below(150);
  return s;
}

}  // namespace

TEST_CASE("attention_reference matches the textbook loops", "[kernels][attention]") {
  const uint64_t seed = GENERATE(range(0, 12));
  InputRng rng(seed * 7919 + 1);
  const AttentionShape s = random_shape(rng);
  INFO("seed " << seed << " " << s.describe());
  const Inputs in = make_inputs(s, Precision::kFp16, seed);
  std::vector<float> got(in.q.size());
  attention_reference(s, in.q, in.k, in.v, got);
  const CheckReport r =
      check_close(naive_loops(s, in.q, in.k, in.v), got, {.atol = 1e-6, .rtol = 1e-5});
  INFO(r.summary("reference", s.describe()));
  CHECK(r.passed);
}

TEST_CASE("native and flash CPU kernels agree with the reference within the dtype's tolerance",
          "[kernels][attention]") {
  const uint64_t seed = GENERATE(range(0, 16));
  const Precision p = seed % 2 ? Precision::kBf16 : Precision::kFp16;
  InputRng rng(seed * 104729 + 3);
  const AttentionShape s = random_shape(rng);
  INFO("seed " << seed << " " << s.describe() << " " << precision_name(p));
  const Inputs in = make_inputs(s, p, seed + 100);
  std::vector<float> ref(in.q.size()), native(in.q.size()), flash(in.q.size());
  attention_reference(s, in.q, in.k, in.v, ref);
  const int64_t ws = native_attention_cpu(s, p, in.q, in.k, in.v, native);
  CHECK(ws == s.batch * s.heads * s.seq_q * s.seq_kv * 2);
  flash_attention_cpu(s, p, in.q, in.k, in.v, flash);
  const CheckReport rn = check_close(ref, native, tolerance_for(p));
  const CheckReport rf = check_close(ref, flash, tolerance_for(p));
  INFO(rn.summary("native", s.describe()));
  INFO(rf.summary("flash", s.describe()));
  CHECK(rn.passed);
  CHECK(rf.passed);
}

TEST_CASE("flash CPU tiling does not depend on the tile size", "[kernels][attention]") {
  const AttentionShape s{.batch = 1,
                         .heads = 4,
                         .kv_heads = 1,
                         .seq_q = 77,
                         .seq_kv = 93,
                         .head_dim = 64,
                         .causal = true};
  const Inputs in = make_inputs(s, Precision::kFp16, 5);
  std::vector<float> ref(in.q.size()), a(in.q.size()), b(in.q.size());
  attention_reference(s, in.q, in.k, in.v, ref);
  flash_attention_cpu(s, Precision::kFp16, in.q, in.k, in.v, a, 64, 64);
  flash_attention_cpu(s, Precision::kFp16, in.q, in.k, in.v, b, 16, 8);
  CHECK(check_close(ref, a, tolerance_for(Precision::kFp16)).passed);
  CHECK(check_close(ref, b, tolerance_for(Precision::kFp16)).passed);
}

TEST_CASE("attention special cases have closed forms", "[kernels][attention]") {
  // One key: the output is that key's value row, whatever the scores.
  AttentionShape one{
      .batch = 1, .heads = 2, .kv_heads = 1, .seq_q = 3, .seq_kv = 1, .head_dim = 64};
  Inputs in = make_inputs(one, Precision::kFp16, 9);
  std::vector<float> o(in.q.size());
  attention_reference(one, in.q, in.k, in.v, o);
  for (int64_t i = 0; i < one.heads * one.seq_q; ++i)
    for (int64_t c = 0; c < 64; ++c) REQUIRE(o[i * 64 + c] == Approx(in.v[c]));
  // Zero queries: uniform weights, so each output is the mean of the visible value rows; with a
  // causal prefill the first row sees only key 0.
  AttentionShape causal{.batch = 1,
                        .heads = 1,
                        .kv_heads = 1,
                        .seq_q = 4,
                        .seq_kv = 4,
                        .head_dim = 64,
                        .causal = true};
  in = make_inputs(causal, Precision::kFp16, 11);
  std::fill(in.q.begin(), in.q.end(), 0.0f);
  o.assign(in.q.size(), 0.0f);
  attention_reference(causal, in.q, in.k, in.v, o);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t c = 0; c < 64; ++c) {
      double mean = 0;
      for (int64_t j = 0; j <= i; ++j) mean += in.v[j * 64 + c];
      REQUIRE(o[i * 64 + c] == Approx(mean / double(i + 1)));
    }
  }
}

TEST_CASE("visible_pairs counts the causal mask exactly", "[kernels][attention]") {
  AttentionShape s{.batch = 2, .heads = 3, .kv_heads = 3, .seq_q = 5, .seq_kv = 8, .head_dim = 64};
  CHECK(s.visible_pairs() == 2 * 3 * 5 * 8);
  s.causal = true;  // rows see 4, 5, 6, 7, 8 keys
  CHECK(s.visible_pairs() == 2 * 3 * (4 + 5 + 6 + 7 + 8));
}

TEST_CASE("bad attention shapes are input errors naming the shape", "[kernels][attention]") {
  AttentionShape s{.batch = 1, .heads = 6, .kv_heads = 4, .seq_q = 8, .seq_kv = 8, .head_dim = 64};
  REQUIRE_THROWS_WITH(s.validate(), Catch::Matchers::Contains("kv_heads 4 must divide heads 6"));
  s.kv_heads = 2;
  s.head_dim = 96;
  REQUIRE_THROWS_AS(s.validate(), kvsim::InputError);
  s.head_dim = 64;
  s.causal = true;
  s.seq_q = 9;
  REQUIRE_THROWS_WITH(s.validate(), Catch::Matchers::Contains("seq_q <= seq_kv"));
}
