// Properties the latency model must keep for every input: longer never faster, GQA never
// slower than MHA, native never faster than flash at long sequences, the lower bound never above
// the estimate, and decode time affine in the total context (the engine's fast-forward).
#include <catch2/catch.hpp>

#include <random>

#include "tests/latency/latency_test_util.h"

using namespace kvsim;
using kvsim::test::decode_batch;
using kvsim::test::make_model;
using kvsim::test::prefill_batch;

namespace {

const std::vector<std::string> kModels = {"seed-7b-mha", "llama-3-8b", "qwen2.5-7b", "mixtral-8x7b",
                                          "mistral-7b"};

// A random mixed batch: some prefill chunks (some with cached context), some decode sequences.
BatchShape random_batch(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> count(0, 6);
  std::uniform_int_distribution<int64_t> len(1, 40000);
  BatchShape b;
  const int np = count(rng), nd = count(rng);
  for (int i = 0; i < np; ++i) {
    b.prefill.push_back({len(rng) / 4 + 1, (rng() % 2) ? len(rng) : 0, (rng() % 3) != 0});
  }
  for (int i = 0; i < nd; ++i) b.decode.push_back({len(rng)});
  if (b.prefill.empty() && b.decode.empty()) b.decode.push_back({len(rng)});
  const int blocks[] = {0, 1, 8, 16, 32, 128};
  b.block_tokens = blocks[rng() % 6];
  return b;
}

}  // namespace

TEST_CASE("the lower bound is never above the estimate, per operation and in total",
          "[latency][property]") {
  const int seed = GENERATE(range(0, 200));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const std::string& name = kModels[seed % kModels.size()];
  const AttentionKind a = seed % 2 ? AttentionKind::kNative : AttentionKind::kFlash;
  const auto m = make_model(name, a);
  const BatchShape b = random_batch(rng);
  const auto est = m.iteration(b);
  const auto lb = m.lower_bound(b);
  REQUIRE(est.ops.size() == lb.ops.size());
  for (size_t i = 0; i < est.ops.size(); ++i) {
    INFO(est.ops[i].name);
    CHECK(lb.ops[i].seconds <= est.ops[i].seconds);
    CHECK(lb.ops[i].flops == est.ops[i].flops);  // same work, different rates
    CHECK(lb.ops[i].bytes == est.ops[i].bytes);
  }
  CHECK(lb.seconds <= est.seconds);
  CHECK(lb.seconds > 0);
}

TEST_CASE("a longer sequence is never faster", "[latency][property]") {
  for (const std::string& name : kModels) {
    for (AttentionKind a : {AttentionKind::kNative, AttentionKind::kFlash}) {
      const auto m = make_model(name, a);
      SequenceLatency prev = sequence_latency(m, 1);
      for (int64_t s = 2; s <= 65536; s = s * 3 / 2 + 1) {
        INFO(name << " " << attention_kind_name(a) << " seq " << s);
        const SequenceLatency cur = sequence_latency(m, s);
        CHECK(cur.prefill_s >= prev.prefill_s);
        CHECK(cur.prefill_lower_bound_s >= prev.prefill_lower_bound_s);
        CHECK(cur.ttft_s >= prev.ttft_s);
        CHECK(cur.decode_step_s >= prev.decode_step_s);
        CHECK(cur.decode_step_lower_bound_s >= prev.decode_step_lower_bound_s);
        prev = cur;
      }
    }
  }
}

TEST_CASE("more decode context or a bigger chunk is never faster", "[latency][property]") {
  const int seed = GENERATE(range(0, 50));
  std::mt19937_64 rng(seed);
  const auto m = make_model(kModels[seed % kModels.size()]);
  BatchShape b = random_batch(rng);
  const double before = m.iteration(b).seconds;
  BatchShape more = b;
  if (!more.decode.empty()) more.decode[0].context_tokens += 1 + rng() % 5000;
  if (!more.prefill.empty()) more.prefill[0].tokens += 1 + rng() % 5000;
  CHECK(m.iteration(more).seconds >= before);
  BatchShape extra = b;
  extra.decode.push_back({1 + static_cast<int64_t>(rng() % 5000)});
  CHECK(m.iteration(extra).seconds >= before);
}

TEST_CASE("GQA is never slower than MHA, all else equal", "[latency][property]") {
  for (AttentionKind a : {AttentionKind::kNative, AttentionKind::kFlash}) {
    const auto mha = make_model("seed-7b-mha", a);
    for (int kv : {16, 8, 4, 2, 1}) {
      const auto gqa = make_model("seed-7b-mha", a, kv);
      for (int64_t s : {1, 100, 4096, 16384, 32768}) {
        INFO(attention_kind_name(a) << " kv " << kv << " seq " << s);
        const auto x = sequence_latency(mha, s, 4, 16);
        const auto y = sequence_latency(gqa, s, 4, 16);
        CHECK(y.prefill_s <= x.prefill_s);
        CHECK(y.ttft_s <= x.ttft_s);
        CHECK(y.decode_step_s <= x.decode_step_s);
        CHECK(y.prefill_lower_bound_s <= x.prefill_lower_bound_s);
        CHECK(y.decode_step_lower_bound_s <= x.decode_step_lower_bound_s);
      }
    }
  }
}

TEST_CASE("native attention is never faster than flash beyond 2,048 tokens",
          "[latency][property]") {
  for (const std::string& name : kModels) {
    const auto nat = make_model(name, AttentionKind::kNative);
    const auto fl = make_model(name, AttentionKind::kFlash);
    for (int64_t s = 2048; s <= 131072; s *= 2) {
      INFO(name << " seq " << s);
      CHECK(sequence_latency(nat, s).prefill_s >= sequence_latency(fl, s).prefill_s);
      CHECK(sequence_latency(nat, s).prefill_lower_bound_s >=
            sequence_latency(fl, s).prefill_lower_bound_s);
      CHECK(sequence_latency(nat, s).decode_step_s >= sequence_latency(fl, s).decode_step_s);
    }
  }
}

TEST_CASE("decode_step_seconds equals iteration() on decode-only batches with those totals",
          "[latency][property][fastforward]") {
  const int seed = GENERATE(range(0, 100));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const auto m = make_model(kModels[seed % kModels.size()],
                            seed % 2 ? AttentionKind::kNative : AttentionKind::kFlash);
  const int n = 1 + static_cast<int>(rng() % 64);
  const int blocks[] = {0, 16, 32};
  const int block = blocks[rng() % 3];
  std::vector<int64_t> ctx;
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    ctx.push_back(1 + static_cast<int64_t>(rng() % 30000));
    // The sum the engine passes is of attended tokens: each context capped at the model's
    // sliding window (mistral-7b: 4,096), as iteration() caps each DecodeSeq.
    total += m.model().attended_tokens(ctx.back());
  }
  const auto it = m.iteration(decode_batch(ctx, block));
  // Same code path: exactly equal.
  CHECK(m.decode_step_seconds(n, total, block) == it.seconds);
  CHECK(m.decode_step_lower_bound_seconds(n, total, block) <= it.seconds);
  // Affine: a + b * total to rounding.
  const AffineCost ab = m.decode_step_affine(n, block);
  CHECK(ab.at(static_cast<double>(total)) == Approx(it.seconds).epsilon(1e-12));
  CHECK(ab.b > 0);
  CHECK(ab.a > 0);
}

TEST_CASE("k decode steps in closed form equal k steps one at a time", "[latency][fastforward]") {
  const auto m = make_model("llama-3-8b");
  const int64_t n = 8;
  const int block = 16;
  int64_t total = 8 * 3000;
  const int64_t k = 500;
  double stepped = 0;
  for (int64_t i = 0; i < k; ++i) {
    stepped += m.decode_step_seconds(n, total, block);
    total += n;  // every sequence grows by one token
  }
  const AffineCost ab = m.decode_step_affine(n, block);
  const double T0 = 8 * 3000;
  const double closed = k * ab.a + ab.b * (k * T0 + n * k * (k - 1) / 2.0);
  CHECK(closed == Approx(stepped).epsilon(1e-12));
}

TEST_CASE("an empty batch costs nothing", "[latency]") {
  const auto m = make_model("llama-3-8b");
  CHECK(m.iteration(BatchShape{}).seconds == 0);
  CHECK(m.decode_step_seconds(0, 0) == 0);
  CHECK(m.decode_step_affine(0).a == 0);
}

TEST_CASE("paged decode is never faster than contiguous, and bigger blocks help",
          "[latency][property]") {
  const auto m = make_model("llama-3-8b");
  const double contiguous = m.decode_step_seconds(16, 16 * 8000, 0);
  double prev = m.decode_step_seconds(16, 16 * 8000, 1);
  CHECK(prev >= contiguous);
  for (int b : {8, 16, 32, 128}) {
    const double cur = m.decode_step_seconds(16, 16 * 8000, b);
    CHECK(cur <= prev);
    CHECK(cur >= contiguous);
    prev = cur;
  }
}
