// iteration(kTotals) of a batch with prefill chunks or listed decode sequences comes from the
// row memo (LatencyModel::mixed_totals): the operations that depend on the row count alone are
// cached and added one by one in the full costing's order, attention costed afresh. Its totals
// must have the bits of the full costing's (iteration(kFull)) for every batch.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/latency/latency_test_util.h"

using namespace kvsim;

namespace {

struct MemoSetup {
  const char* model;
  const char* gpu;
  AttentionKind attention;
  int tp = 1;
  int pp = 1;
  DType weights = DType::kFp16;  // kFp16: the catalog's dtype
  bool tables = false;           // a profile with measured tables (the GEMM roofline)
};

LatencyModel memo_model(const MemoSetup& s) {
  ModelSpec m = Catalog::builtin().model(s.model);
  if (s.weights != DType::kFp16) m.weight_dtype = s.weights;
  const GpuSpec& g = Catalog::builtin().gpu(s.gpu);
  Profile p = default_profile(g);
  if (s.tables) {
    using Points = std::vector<std::pair<double, double>>;
    const auto table = [&](OpClass c, TableMetric metric, TableAxis axis, Points points) {
      p.tables.push_back({c, metric, axis, std::move(points), ""});
    };
    table(OpClass::kGemm, TableMetric::kComputeEfficiency, TableAxis::kTokens,
          {{1, 0.3}, {64, 0.55}, {4096, 0.8}});
    table(OpClass::kElementwise, TableMetric::kMemoryEfficiency, TableAxis::kTokens,
          {{1, 0.4}, {8192, 0.9}});
    table(OpClass::kAttentionFlash, TableMetric::kComputeEfficiency, TableAxis::kSeqLen,
          {{512, 0.41}, {2048, 0.6}, {16384, 0.72}});
    table(OpClass::kAttentionDecode, TableMetric::kMemoryEfficiency, TableAxis::kBatch,
          {{1, 0.5}, {256, 0.85}});
  }
  return LatencyModel(m, g, p, s.attention, s.tp, s.pp);
}

// A random batch: prefill chunks (whole prompts, later chunks, some not emitting), listed
// decode sequences and an aggregate, in any combination, of any block size; chunk sizes powers
// of two half the time (row counts recur, so that rows built by other batches are hit), and now
// and then past the memo's range (16k rows), which costs in full.
BatchShape random_mixed_batch(std::mt19937_64& rng) {
  auto draw = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  BatchShape b;
  const int64_t blocks[] = {0, 16, 32};
  b.block_tokens = static_cast<int>(blocks[draw(0, 2)]);
  const int64_t chunks = draw(0, 3) == 0 ? 0 : draw(1, 5);
  for (int64_t i = 0; i < chunks; ++i) {
    PrefillChunk c;
    const int64_t pick = draw(0, 9);
    c.tokens = pick < 5 ? int64_t{1} << draw(0, 11) : pick < 9 ? draw(1, 3000) : draw(1, 20000);
    c.context_tokens = draw(0, 1) == 0 ? 0 : draw(1, 40000);
    c.emits_token = draw(0, 2) != 0;
    b.prefill.push_back(c);
  }
  const int64_t listed = draw(0, 2) == 0 ? draw(1, 6) : 0;
  for (int64_t i = 0; i < listed; ++i) b.decode.push_back(DecodeSeq{draw(1, 50000)});
  if (draw(0, 3) != 0) {
    b.decode_seqs = draw(0, 1) == 0 ? draw(1, 8) * 32 : draw(0, 300);
    b.decode_context_tokens = b.decode_seqs + draw(0, b.decode_seqs * 8000);
  }
  return b;
}

void check_same_bits(const IterationCost& full, const IterationCost& totals) {
  CHECK(std::bit_cast<uint64_t>(totals.seconds) == std::bit_cast<uint64_t>(full.seconds));
  CHECK(std::bit_cast<uint64_t>(totals.ops_seconds) == std::bit_cast<uint64_t>(full.ops_seconds));
  CHECK(std::bit_cast<uint64_t>(totals.overhead_seconds) ==
        std::bit_cast<uint64_t>(full.overhead_seconds));
  CHECK(std::bit_cast<uint64_t>(totals.flops) == std::bit_cast<uint64_t>(full.flops));
  CHECK(std::bit_cast<uint64_t>(totals.bytes) == std::bit_cast<uint64_t>(full.bytes));
  CHECK(totals.ops.empty());
}

}  // namespace

TEST_CASE("Mixed batches' totals from the row memo have the full costing's bits",
          "[latency][memo][property]") {
  const MemoSetup setups[] = {
      {"llama-3-8b", "a100-sxm4-80gb", AttentionKind::kFlash},
      {"seed-7b-mha", "a100-sxm4-80gb", AttentionKind::kNative},
      {"mixtral-8x7b", "h100-sxm", AttentionKind::kFlash, 2},  // MoE, tensor parallel
      {"llama-3-70b", "h200", AttentionKind::kFlash, 4, 2},    // tensor and pipeline parallel
      {"mistral-7b", "l40s", AttentionKind::kFlash},           // sliding window
      {"qwen2.5-7b", "h100-sxm", AttentionKind::kFlash, 1, 1, DType::kFp8},
      {"llama-3-8b", "a40", AttentionKind::kNative, 1, 1, DType::kInt4},
      {"llama-3.1-8b", "h100-sxm", AttentionKind::kFlash, 1, 1, DType::kFp16, true},
      {"llama-tiny", "cpu-host", AttentionKind::kNative},  // no SM count: the GEMM roofline
  };
  std::mt19937_64 rng(2024);
  for (const MemoSetup& s : setups) {
    INFO(s.model << " on " << s.gpu << ", tp " << s.tp << ", pp " << s.pp);
    const LatencyModel model = memo_model(s);
    for (int i = 0; i < 4000; ++i) {
      const BatchShape b = random_mixed_batch(rng);
      INFO("batch " << i << ": " << b.prefill.size() << " chunks, " << b.decode.size()
                    << " listed decodes, " << b.decode_seqs << " aggregate");
      // Either order: the memos (GEMM, row, LM head, decode step) built by either path first.
      const bool totals_first = (i % 2) == 0;
      const IterationCost first =
          model.iteration(b, totals_first ? OpDetail::kTotals : OpDetail::kFull);
      const IterationCost second =
          model.iteration(b, totals_first ? OpDetail::kFull : OpDetail::kTotals);
      const IterationCost& full = totals_first ? second : first;
      const IterationCost& totals = totals_first ? first : second;
      check_same_bits(full, totals);
      check_same_bits(full, model.iteration(b, OpDetail::kTotals));  // from built rows
    }
  }
}

TEST_CASE("The row memo's totals match a model that never built it", "[latency][memo]") {
  // The same batches through a model whose memos are warm and through fresh models (each batch
  // costed in full before any memo holds its rows).
  const MemoSetup s{"mixtral-8x7b", "h100-sxm", AttentionKind::kFlash, 2};
  const LatencyModel warm = memo_model(s);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 40; ++i) {
    const BatchShape b = random_mixed_batch(rng);
    warm.iteration(b, OpDetail::kTotals);
  }
  std::mt19937_64 again(7);
  for (int i = 0; i < 40; ++i) {
    const BatchShape b = random_mixed_batch(again);
    const LatencyModel fresh = memo_model(s);
    check_same_bits(fresh.iteration(b, OpDetail::kFull), warm.iteration(b, OpDetail::kTotals));
  }
}

TEST_CASE("Mixed batches' totals check their input as the full costing does", "[latency][memo]") {
  const LatencyModel model = test::make_model("llama-3-8b");
  BatchShape b = test::prefill_batch(0);
  CHECK_THROWS_AS(model.iteration(b, OpDetail::kTotals), InvariantError);
  b = test::decode_batch({0});
  CHECK_THROWS_AS(model.iteration(b, OpDetail::kTotals), InvariantError);
  b = test::prefill_batch(16);
  b.decode_seqs = 4;
  b.decode_context_tokens = 3;
  CHECK_THROWS_AS(model.iteration(b, OpDetail::kTotals), InvariantError);
  // An empty batch costs nothing, not even the iteration overhead.
  const IterationCost empty = model.iteration(BatchShape{}, OpDetail::kTotals);
  CHECK(empty.seconds == 0);
  CHECK(empty.flops == 0);
}
