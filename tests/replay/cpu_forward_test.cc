// The CPU forward pass (validate/replay/cpu_forward.h) against a dense double-precision forward
// written here from the model's definition: no paging, no chunking, full causal attention over
// the whole sequence. The tiny model (2 layers, hidden 64, 4 heads over 2 KV heads, head_dim 16,
// ffn 128, vocab 100) and block_tokens 4 put a 12-token sequence on 3 blocks that the pool's
// shuffled free list scatters, so the block-table indexing is exercised, not assumed.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "core/errors.h"
#include "validate/replay/cpu_forward.h"

namespace kvsim::validate {
namespace {

ModelSpec tiny_model() {
  ModelSpec m;
  m.name = "tiny";
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.ffn = 128;
  m.vocab = 100;
  m.max_position = 256;
  return m;
}

ForwardSetup tiny_setup(int64_t num_blocks = 16, int repeats = 1) {
  ForwardSetup s;
  s.model = tiny_model();
  s.block_tokens = 4;
  s.num_blocks = num_blocks;
  s.seed = 11;
  s.repeats = repeats;
  return s;
}

using Vec = std::vector<double>;

Vec rms_norm(const Vec& x, const std::vector<float>& w) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + kRmsNormEps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// y = W x for W [out, in] row-major.
Vec matvec(const std::vector<float>& w, const Vec& x, size_t out) {
  Vec y(out, 0.0);
  for (size_t o = 0; o < out; ++o) {
    for (size_t i = 0; i < x.size(); ++i) y[o] += static_cast<double>(w[o * x.size() + i]) * x[i];
  }
  return y;
}

// NeoX rotation of one head at `pos`, angles in double.
void rope(double* h, int64_t pos, int d) {
  for (int i = 0; i < d / 2; ++i) {
    const double a = static_cast<double>(pos) * std::pow(kRopeTheta, -2.0 * i / d);
    const double x1 = h[i], x2 = h[i + d / 2];
    h[i] = x1 * std::cos(a) - x2 * std::sin(a);
    h[i + d / 2] = x2 * std::cos(a) + x1 * std::sin(a);
  }
}

// The logits at every position of request `id`'s first `n` tokens: [n][vocab].
std::vector<Vec> dense_reference(const LlamaWeights& w, const ForwardSetup& s, int64_t id,
                                 int64_t n) {
  const ModelSpec& m = s.model;
  const size_t H = static_cast<size_t>(m.hidden), D = static_cast<size_t>(m.head_dim);
  const size_t nq = static_cast<size_t>(m.heads) * D, nkv = static_cast<size_t>(m.kv_heads) * D;
  const size_t F = static_cast<size_t>(m.ffn);
  const int group = m.heads / m.kv_heads;
  std::vector<Vec> x(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) {
    const auto tok = static_cast<size_t>(replay_token_id(s.seed, id, p, m.vocab));
    x[p].assign(w.embed.begin() + static_cast<std::ptrdiff_t>(tok * H),
                w.embed.begin() + static_cast<std::ptrdiff_t>((tok + 1) * H));
  }
  for (const LlamaLayerWeights& l : w.layers) {
    std::vector<Vec> qkv(static_cast<size_t>(n));
    for (int64_t p = 0; p < n; ++p) {
      qkv[p] = matvec(l.wqkv, rms_norm(x[p], l.attn_norm), nq + 2 * nkv);
      for (int h = 0; h < m.heads + m.kv_heads; ++h) rope(&qkv[p][h * D], p, m.head_dim);
    }
    for (int64_t p = 0; p < n; ++p) {
      Vec attn(nq, 0.0);
      for (int h = 0; h < m.heads; ++h) {
        const size_t kv = static_cast<size_t>(h / group) * D;
        Vec score(static_cast<size_t>(p + 1));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= p; ++j) {
          double dot = 0;
          for (size_t c = 0; c < D; ++c) dot += qkv[p][h * D + c] * qkv[j][nq + kv + c];
          score[j] = dot / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, score[j]);
        }
        for (double& sc : score) sum += (sc = std::exp(sc - mx));
        for (int64_t j = 0; j <= p; ++j) {
          for (size_t c = 0; c < D; ++c)
            attn[h * D + c] += score[j] / sum * qkv[j][nq + nkv + kv + c];
        }
      }
      const Vec o = matvec(l.wo, attn, H);
      for (size_t c = 0; c < H; ++c) x[p][c] += o[c];
      const Vec gu = matvec(l.w_gate_up, rms_norm(x[p], l.mlp_norm), 2 * F);
      Vec act(F);
      for (size_t c = 0; c < F; ++c) act[c] = gu[c] / (1.0 + std::exp(-gu[c])) * gu[F + c];
      const Vec down = matvec(l.w_down, act, H);
      for (size_t c = 0; c < H; ++c) x[p][c] += down[c];
    }
  }
  std::vector<Vec> logits;
  for (int64_t p = 0; p < n; ++p) {
    logits.push_back(
        matvec(w.lm_head_or_embed(), rms_norm(x[p], w.final_norm), static_cast<size_t>(m.vocab)));
  }
  return logits;
}

ClockBatch batch(std::vector<ClockSeq> prefill, std::vector<ClockSeq> decode) {
  ClockBatch b;
  b.prefill = std::move(prefill);
  b.decode = std::move(decode);
  return b;
}

// Float32 against double: each logit is a 64-term sum after 2 layers of 64- to 128-term sums;
// float's 2^-24 relative rounding leaves errors of ~1e-7 on logits of scale ~0.35 (both seen
// here), so 2e-5 absolute is a 100x margin, while attention that drops one key (a mask or block
// off by one position) moves the logits by ~5e-2 (tried).
constexpr double kLogitTol = 2e-5;

// `got` row `row` against the reference logits `want`.
void check_row(const std::vector<float>& got, int row, const Vec& want) {
  const size_t vocab = want.size();
  REQUIRE(got.size() >= (static_cast<size_t>(row) + 1) * vocab);
  double worst = 0, scale = 0;
  for (size_t c = 0; c < vocab; ++c) {
    worst = std::max(worst, std::abs(got[row * vocab + c] - want[c]));
    scale = std::max(scale, std::abs(want[c]));
  }
  INFO("row " << row << ": max |error| " << worst << ", max |logit| " << scale);
  CHECK(scale > 0.05);  // the logits are not all ~0, so the tolerance means something
  CHECK(worst <= kLogitTol);
}

TEST_CASE(
    "a 9-token prefill's logits match the dense double-precision forward, also with a "
    "second sequence in the batch",
    "[replay][cpu_forward]") {
  const ForwardSetup s = tiny_setup();
  CpuForward f(s);
  const auto ref1 = dense_reference(f.weights(), s, 1, 9);
  const auto ref2 = dense_reference(f.weights(), s, 2, 7);
  SECTION("alone") {
    const auto logits = f.run(batch({{1, 0, 9, true}}, {}));
    REQUIRE(logits.size() == 100u);
    check_row(logits, 0, ref1[8]);
    CHECK(f.pool().blocks_in_use() == 3);  // ceil(9 / 4)
  }
  SECTION("interleaved with a 7-token prefill") {
    const auto logits = f.run(batch({{1, 0, 9, true}, {2, 0, 7, true}}, {}));
    REQUIRE(logits.size() == 200u);
    check_row(logits, 0, ref1[8]);
    check_row(logits, 1, ref2[6]);
    CHECK(f.pool().blocks_in_use() == 5);  // ceil(9 / 4) + ceil(7 / 4) = 3 + 2
  }
}

TEST_CASE(
    "chunks 5 + 4 and 3 decode steps, interleaved with a second sequence, match the dense "
    "forward at every emitted position",
    "[replay][cpu_forward]") {
  const ForwardSetup s = tiny_setup();
  CpuForward f(s);
  const auto ref1 = dense_reference(f.weights(), s, 1, 12);
  const auto ref2 = dense_reference(f.weights(), s, 2, 11);
  // 1: request 1's first chunk (no token) with request 2's whole 7-token prompt.
  auto logits = f.run(batch({{1, 0, 5, false}, {2, 0, 7, true}}, {}));
  REQUIRE(logits.size() == 100u);
  check_row(logits, 0, ref2[6]);
  // 2: request 1's last chunk (positions 5..8) beside request 2's first decode (position 7):
  // both read KV that iteration 1 wrote.
  logits = f.run(batch({{1, 5, 4, true}}, {{2, 7, 1, true}}));
  REQUIRE(logits.size() == 200u);
  check_row(logits, 0, ref1[8]);
  check_row(logits, 1, ref2[7]);
  // 3..5: both decode; request 1 at positions 9, 10, 11, request 2 at 8, 9, 10.
  for (int k = 0; k < 3; ++k) {
    logits = f.run(batch({}, {{1, 9 + k, 1, true}, {2, 8 + k, 1, true}}));
    REQUIRE(logits.size() == 200u);
    check_row(logits, 0, ref1[static_cast<size_t>(9 + k)]);
    check_row(logits, 1, ref2[static_cast<size_t>(8 + k)]);
  }
  // 12 tokens and 11 tokens on blocks of 4: 3 + 3.
  CHECK(f.pool().blocks_in_use() == 6);

  SECTION("release returns the blocks") {
    f.release(1);
    CHECK(f.pool().blocks_in_use() == 3);
    f.release_all();
    CHECK(f.pool().blocks_in_use() == 0);
  }
  SECTION("a re-prefill after release reuses stale blocks and still matches") {
    f.release(1);
    logits = f.run(batch({{1, 0, 9, true}}, {}));
    check_row(logits, 0, ref1[8]);
    CHECK(f.pool().blocks_in_use() == 6);  // 3 again for request 1, 3 kept by request 2
  }
  SECTION("a sequence back with kv_before > 0 after release gets its KV filled in") {
    f.release(2);
    CHECK(f.pool().filled(2) == 0);
    // A swap-in: 10 positions held, the step computes position 10.
    logits = f.run(batch({}, {{2, 10, 1, true}}));
    REQUIRE(logits.size() == 100u);
    for (float v : logits) CHECK(std::isfinite(v));
    CHECK(f.pool().filled(2) == 11);
    CHECK(f.pool().blocks_in_use() == 6);  // ceil(11 / 4) = 3 again
  }
}

TEST_CASE(
    "the clock's repeats rewrite the same KV: repeats = 3 leaves the logits of the next "
    "iteration unchanged",
    "[replay][cpu_forward]") {
  const ForwardSetup one = tiny_setup(16, 1);
  const ForwardSetup three = tiny_setup(16, 3);
  CpuForward a(one), b(three);
  const ClockBatch prefill = batch({{1, 0, 6, true}, {2, 0, 5, false}}, {});
  const ClockBatch mixed = batch({{2, 5, 3, true}}, {{1, 6, 1, true}});
  const ClockBatch decode = batch({}, {{1, 7, 1, true}, {2, 8, 1, true}});
  for (CpuForward* f : {&a, &b}) {
    for (const ClockBatch* it : {&prefill, &mixed}) {
      const double t = f->seconds(*it);
      CHECK(t > 0);
      CHECK(std::isfinite(t));
    }
  }
  // Same values to the bit: the same float operations in the same order.
  CHECK(a.run(decode) == b.run(decode));
}

TEST_CASE("GEMMs split over 3 threads give the same logits within float rounding",
          "[replay][cpu_forward]") {
  ForwardSetup s = tiny_setup();
  s.threads = 3;  // the QKV GEMM's 128 output columns in slices of 43, 43 and 42
  CpuForward f(s);
  const auto ref = dense_reference(f.weights(), s, 4, 10);
  f.run(batch({{4, 0, 6, false}}, {}));
  const auto logits = f.run(batch({{4, 6, 4, true}}, {}));
  check_row(logits, 0, ref[9]);
}

TEST_CASE("a pool that runs dry names the request", "[replay][cpu_forward]") {
  // 9 tokens on blocks of 4 need ceil(9 / 4) = 3 blocks; the pool has 2.
  CpuForward f(tiny_setup(2));
  CHECK_THROWS_WITH(f.run(batch({{7, 0, 9, true}}, {})),
                    Catch::Contains("ran out of blocks for request 7 (9 tokens need 3 blocks"));
}

TEST_CASE("a pool over 8 GiB is refused with the bytes it asked for", "[replay][cpu_forward]") {
  // One block: K and V x 2 layers x 2 KV heads x 4 tokens x 16 dims x 4 bytes = 2048 bytes;
  // 8 GiB = 8589934592 bytes = 4194304 blocks, so one block more asks for 8589936640 bytes.
  CHECK(PagedKvPool::bytes_for(tiny_model(), 4, 4194304) == 8589934592);
  CHECK_THROWS_AS(make_cpu_forward(tiny_setup(4194305)), InputError);
  CHECK_THROWS_WITH(make_cpu_forward(tiny_setup(4194305)),
                    Catch::Contains("asks for 8589936640 bytes"));
}

TEST_CASE("a model that is not dense Llama-shaped is refused in one line",
          "[replay][cpu_forward]") {
  ForwardSetup s = tiny_setup();
  s.model.num_experts = 8;
  CHECK_THROWS_WITH(make_cpu_forward(s),
                    "cpu forward: model tiny has 8 experts; the replay's forward pass runs dense "
                    "Llama-shaped models only");
}

}  // namespace
}  // namespace kvsim::validate
