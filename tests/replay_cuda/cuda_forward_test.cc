// The CUDA forward pass (validate/replay/cuda_forward.cu). The [gpu] tests run a tiny Llama-shaped
// model through chunked prefills, decodes and a release, and compare the logits with a dense
// double-precision forward pass written here from the model's definition (the same weights and
// token ids: validate/replay/cuda_forward.h), rounded to fp16 wherever the device stores a tensor.
// Without a device they print "gpu test skipped:" (tests/gpu_skip.h); the input-error test runs
// everywhere.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/errors.h"
#include "kernels/cpu_ref/precision.h"
#include "kernels/cpu_ref/tolerance.h"
#include "tests/gpu_skip.h"
#include "validate/replay/forward_pass.h"
#ifdef KVSIM_HAVE_CUDA
#include "validate/replay/cuda_forward.h"
#endif

using namespace kvsim;
using namespace kvsim::validate;

namespace {

// 2 layers, hidden 256, 4 query heads sharing 2 KV heads (GQA) of head_dim 64, ffn 512, vocab
// 1000: every kernel runs (flash prefill at head_dim 64, the varlen paged decode) in milliseconds.
ModelSpec tiny_model() {
  ModelSpec m;
  m.name = "tiny-test";
  m.layers = 2;
  m.hidden = 256;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 64;
  m.ffn = 512;
  m.vocab = 1000;
  m.max_position = 4096;
  return m;
}

ForwardSetup tiny_setup(int64_t num_blocks) {
  ForwardSetup s;
  s.model = tiny_model();
  s.block_tokens = 16;
  s.num_blocks = num_blocks;
  s.seed = 7;
  return s;
}

[[maybe_unused]] ClockSeq seq(int64_t id, int64_t kv_before, int64_t n, bool emits) {
  return ClockSeq{id, kv_before, n, emits};
}

}  // namespace

TEST_CASE("the CUDA forward pass refuses what it cannot run, in one line", "[replay]") {
#ifndef KVSIM_HAVE_CUDA
  REQUIRE_THROWS_WITH(make_cuda_forward(tiny_setup(8)),
                      Catch::Contains("built without CUDA"));
#else
  // The model checks come before the device probe, so they hold on any machine.
  ForwardSetup bad = tiny_setup(8);
  bad.model.head_dim = 96;  // the attention kernels are instantiated for 64 and 128
  REQUIRE_THROWS_AS(make_cuda_forward(bad), InputError);
  REQUIRE_THROWS_WITH(make_cuda_forward(bad), Catch::Contains("has head_dim 96 (64 or 128 only)"));
  bad = tiny_setup(8);
  bad.model.num_experts = 8;
  REQUIRE_THROWS_WITH(make_cuda_forward(bad), Catch::Contains("is a mixture of experts"));
  // The pool: 2^40 blocks of 16 tokens x 2 KV heads x 64 x 2 bytes x K and V x 2 layers is
  // 2^40 x 16 KiB = 16 PiB, more than any device: without a device the probe says so first.
  const ForwardSetup huge = tiny_setup(int64_t{1} << 40);
  try {
    (void)make_cuda_forward(huge);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find('\n') == std::string::npos);
    CHECK((what.find("no CUDA device") != std::string::npos ||
           what.find("GiB free") != std::string::npos));
  }
#endif
}

#ifdef KVSIM_HAVE_CUDA
namespace {

using kernels::Precision;
double r16(double v) { return kernels::round_to(Precision::kFp16, static_cast<float>(v)); }

// The dense reference: the same weights (fp16 values, as the device holds them), each sequence
// computed from scratch over all its tokens, fp16 rounding at every tensor the device stores.
class Reference {
 public:
  explicit Reference(const ForwardSetup& s) : s_(s), m_(s_.model) {}

  // Logits at the last of the request's first `length` tokens.
  std::vector<double> logits(int64_t request_id, int64_t length) const {
    const int h = m_.hidden, d = m_.head_dim, hq = m_.heads, hk = m_.kv_heads;
    const int qkv_w = (hq + 2 * hk) * d;
    std::vector<std::vector<double>> x(static_cast<size_t>(length));
    const std::vector<double> emb = weight(-1, WeightKind::kEmbedding, int64_t{m_.vocab} * h);
    for (int64_t t = 0; t < length; ++t) {
      const int32_t id = forward_token(s_.seed, request_id, t, m_.vocab);
      x[t].assign(emb.begin() + int64_t{id} * h, emb.begin() + int64_t{id + 1} * h);
    }
    for (int l = 0; l < m_.layers; ++l) {
      const auto an = weight(l, WeightKind::kAttnNorm, h);
      const auto wqkv = weight(l, WeightKind::kWqkv, int64_t{qkv_w} * h);
      const auto wo = weight(l, WeightKind::kWo, int64_t{h} * hq * d);
      const auto mn = weight(l, WeightKind::kMlpNorm, h);
      const auto gu = weight(l, WeightKind::kGateUp, int64_t{2} * m_.ffn * h);
      const auto dn = weight(l, WeightKind::kDown, int64_t{h} * m_.ffn);
      std::vector<std::vector<double>> qkv(static_cast<size_t>(length));
      for (int64_t t = 0; t < length; ++t) {
        qkv[t] = linear(norm(x[t], an), wqkv, qkv_w);
        rope(qkv[t], t);
      }
      for (int64_t t = 0; t < length; ++t) {
        std::vector<double> o(static_cast<size_t>(hq) * d);
        for (int head = 0; head < hq; ++head) {
          const int kvh = head / (hq / hk);
          const double* q = &qkv[t][head * d];
          std::vector<double> p(static_cast<size_t>(t + 1));
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j <= t; ++j) {
            const double* k = &qkv[j][(hq + kvh) * d];
            double dot = 0;
            for (int c = 0; c < d; ++c) dot += q[c] * k[c];
            p[j] = dot / std::sqrt(double(d));
            mx = std::max(mx, p[j]);
          }
          for (double& v : p) sum += (v = std::exp(v - mx));
          for (int c = 0; c < d; ++c) {
            double acc = 0;
            for (int64_t j = 0; j <= t; ++j) acc += p[j] * qkv[j][(hq + hk + kvh) * d + c];
            o[head * d + c] = r16(acc / sum);
          }
        }
        const auto a = linear(o, wo, h);
        for (int c = 0; c < h; ++c) x[t][c] = r16(x[t][c] + a[c]);
        const auto g = linear(norm(x[t], mn), gu, 2 * m_.ffn);
        std::vector<double> act(static_cast<size_t>(m_.ffn));
        for (int c = 0; c < m_.ffn; ++c) {
          act[c] = r16(g[c] / (1 + std::exp(-g[c])) * g[m_.ffn + c]);
        }
        const auto down = linear(act, dn, h);
        for (int c = 0; c < h; ++c) x[t][c] = r16(x[t][c] + down[c]);
      }
    }
    const auto fnw = weight(-1, WeightKind::kFinalNorm, h);
    const auto head = weight(-1, WeightKind::kLmHead, int64_t{m_.vocab} * h);
    return linear(norm(x[length - 1], fnw), head, m_.vocab);
  }

 private:
  std::vector<double> weight(int layer, WeightKind kind, int64_t n) const {
    const WeightInit w = weight_init(m_, kind);
    const uint64_t stream = weight_stream(s_.seed, layer, kind);
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = r16(weight_value(stream, i, w.offset, w.scale));
    return v;
  }
  std::vector<double> norm(const std::vector<double>& x, const std::vector<double>& w) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1 / std::sqrt(ss / double(x.size()) + kRmsEps);
    std::vector<double> out(x.size());
    for (size_t c = 0; c < x.size(); ++c) out[c] = r16(x[c] * inv * w[c]);
    return out;
  }
  // y = x W^T, W [n, x.size()].
  static std::vector<double> linear(const std::vector<double>& x, const std::vector<double>& w,
                                    int n) {
    std::vector<double> y(static_cast<size_t>(n));
    const size_t k = x.size();
    for (int r = 0; r < n; ++r) {
      double acc = 0;
      for (size_t c = 0; c < k; ++c) acc += x[c] * w[r * k + c];
      y[r] = r16(acc);
    }
    return y;
  }
  void rope(std::vector<double>& row, int64_t pos) const {
    const int d = m_.head_dim, half = d / 2;
    for (int head = 0; head < m_.heads + m_.kv_heads; ++head) {
      for (int i = 0; i < half; ++i) {
        const double ang = double(pos) * std::pow(kRopeBase, -2.0 * i / d);
        double& a = row[head * d + i];
        double& b = row[head * d + i + half];
        const double na = a * std::cos(ang) - b * std::sin(ang);
        const double nb = b * std::cos(ang) + a * std::sin(ang);
        a = r16(na);
        b = r16(nb);
      }
    }
  }

  ForwardSetup s_;
  const ModelSpec& m_;
};

// The fp16 kernel tolerance (kernels/cpu_ref/tolerance) is for one kernel; a forward pass chains
// some twenty fp16 stores (each half an ulp, 2^-12 relative) through two layers, and a store that
// rounds the other way moves everything after it by an ulp, so the absolute bound is five times
// the kernel table's atol and the relative one its rtol.
kernels::Tolerance forward_tolerance() {
  const kernels::Tolerance k = kernels::tolerance_for(Precision::kFp16);
  return {5 * k.atol, k.rtol};
}

void check_rows(const std::vector<float>& got, int row, const std::vector<double>& ref,
                const std::string& what) {
  const size_t v = ref.size();
  const std::vector<float> g(got.begin() + row * v, got.begin() + (row + 1) * v);
  const std::vector<float> r(ref.begin(), ref.end());
  const kernels::CheckReport rep = kernels::check_close(r, g, forward_tolerance());
  INFO(rep.summary(what, "vocab " + std::to_string(v)));
  CHECK(rep.passed);
}

}  // namespace

TEST_CASE("CUDA forward logits match a dense double reference through chunked prefill, decode "
          "and release", "[gpu][replay]") {
  if (!kvsim::test::gpu_available_or_skip()) return;
  const ForwardSetup setup = tiny_setup(32);
  const Reference ref(setup);
  auto fwd = make_cuda_forward_pass(setup);

  // Iteration 1: request 1 prefills 40 tokens whole (3 blocks) and emits; request 2 prefills a
  // first chunk of 20 (2 blocks) and does not. One logits row: request 1 at position 39.
  ClockBatch b1;
  b1.prefill = {seq(1, 0, 40, true), seq(2, 0, 20, false)};
  CHECK(fwd->seconds(b1) > 0);
  auto got = fwd->last_logits();
  REQUIRE(got.size() == size_t{1} * 1000);
  check_rows(got, 0, ref.logits(1, 40), "request 1 prefill (40 tokens)");

  // Iteration 2: request 2's second chunk, positions 20..32, attends to the 20 tokens of the
  // pool (across the block boundary at 16) plus itself, causally (bottom-right aligned); request
  // 1 decodes position 40 over 41 tokens of KV (3 blocks). Rows: request 2 at 32, request 1 at 40.
  ClockBatch b2;
  b2.prefill = {seq(2, 20, 13, true)};
  b2.decode = {seq(1, 40, 1, true)};
  CHECK(fwd->seconds(b2) > 0);
  got = fwd->last_logits();
  REQUIRE(got.size() == size_t{2} * 1000);
  check_rows(got, 0, ref.logits(2, 33), "request 2 second chunk (33 tokens)");
  check_rows(got, 1, ref.logits(1, 41), "request 1 decode (41 tokens)");

  // Iteration 3: request 1 is released and request 3 (5 tokens) reuses its blocks; request 2
  // decodes position 33 (34 tokens of KV).
  fwd->release(1);
  ClockBatch b3;
  b3.prefill = {seq(3, 0, 5, true)};
  b3.decode = {seq(2, 33, 1, true)};
  CHECK(fwd->seconds(b3) > 0);
  got = fwd->last_logits();
  REQUIRE(got.size() == size_t{2} * 1000);
  check_rows(got, 0, ref.logits(3, 5), "request 3 prefill on reused blocks (5 tokens)");
  check_rows(got, 1, ref.logits(2, 34), "request 2 decode (34 tokens)");
  CHECK(fwd->aliased_blocks() == 0);  // 3 + 3 + 1 blocks at most, of 32
}

TEST_CASE("CUDA forward aliases blocks beyond the pool instead of failing", "[gpu][replay]") {
  if (!kvsim::test::gpu_available_or_skip()) return;
  // 4 blocks of 16 tokens. Request 1 holds 40 tokens = ceil(40/16) = 3 blocks, request 2 30
  // tokens = 2 blocks: 5 > 4, so exactly one logical block aliases a block in use.
  auto fwd = make_cuda_forward_pass(tiny_setup(4));
  ClockBatch b;
  b.prefill = {seq(1, 0, 40, true), seq(2, 0, 30, true)};
  CHECK(fwd->seconds(b) > 0);
  CHECK(fwd->aliased_blocks() == 1);
  // Released: request 1's 3 owned blocks and request 2's 1 owned block go back; a new 64-token
  // request (4 blocks) then fits without aliasing: the count stays 1.
  fwd->release(1);
  fwd->release(2);
  ClockBatch c;
  c.prefill = {seq(3, 0, 64, true)};
  CHECK(fwd->seconds(c) > 0);
  CHECK(fwd->aliased_blocks() == 1);
}
#endif
