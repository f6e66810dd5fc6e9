#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu_ref/attention_ref.h"
#include "kernels/cpu_ref/gemm_ref.h"
#include "kernels/cpu_ref/membw_ref.h"
#include "kernels/cpu_ref/paged_decode_ref.h"
#include "kernels/cpu_ref/tolerance.h"

using namespace kvsim::kernels;

TEST_CASE("the shuffled block table is a permutation", "[kernels][paged]") {
  const PagedDecodeShape s{
      .batch = 3, .heads = 4, .kv_heads = 2, .head_dim = 64, .context = 50, .block_size = 16};
  InputRng rng(1);
  std::vector<int32_t> t = shuffled_block_table(s, rng);
  REQUIRE(t.size() == size_t(3 * 4));
  std::vector<int32_t> sorted = t;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> ids(t.size());
  std::iota(ids.begin(), ids.end(), 0);
  CHECK(sorted == ids);
  CHECK(t != ids);
}

TEST_CASE("gather_paged undoes the scatter through the block table", "[kernels][paged]") {
  const PagedDecodeShape s{
      .batch = 2, .heads = 2, .kv_heads = 2, .head_dim = 64, .context = 21, .block_size = 8};
  InputRng rng(2);
  const std::vector<int32_t> table = shuffled_block_table(s, rng);
  // Write token t of (b, kvh) as the value b*1e4 + kvh*1e3 + t into its paged slot by hand.
  std::vector<float> cache(static_cast<size_t>(s.cache_elements()), -1.0f);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t kvh = 0; kvh < 2; ++kvh)
      for (int64_t t = 0; t < 21; ++t) {
        const int64_t blk = table[size_t(b * s.blocks_per_seq() + t / 8)];
        for (int64_t c = 0; c < 64; ++c)
          cache[size_t(((blk * 2 + kvh) * 8 + t % 8) * 64 + c)] = float(b * 10000 + kvh * 1000 + t);
      }
  const std::vector<float> flat = gather_paged(s, cache, table);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t kvh = 0; kvh < 2; ++kvh)
      for (int64_t t = 0; t < 21; ++t)
        REQUIRE(flat[size_t(((b * 2 + kvh) * 21 + t) * 64)] == float(b * 10000 + kvh * 1000 + t));
}

TEST_CASE("paged decode CPU kernel matches the gathered reference for block sizes 1..64",
          "[kernels][paged]") {
  const int64_t block = GENERATE(1, 8, 16, 24, 32, 64);
  const Precision p = block % 16 == 0 ? Precision::kFp16 : Precision::kBf16;
  PagedDecodeShape s{.batch = 3,
                     .heads = 8,
                     .kv_heads = 2,
                     .head_dim = block == 24 ? 64 : 128,
                     .context = 100 + block,
                     .block_size = block};
  INFO(s.describe());
  InputRng rng(static_cast<uint64_t>(block));
  const auto q = random_values(rng, s.batch * s.heads * s.head_dim, p);
  const auto k = random_values(rng, s.cache_elements(), p);
  const auto v = random_values(rng, s.cache_elements(), p);
  const auto table = shuffled_block_table(s, rng);
  std::vector<float> ref(q.size()), got(q.size());
  paged_decode_reference(s, q, k, v, table, ref);
  paged_decode_cpu(s, p, q, k, v, table, got);
  const CheckReport r = check_close(ref, got, tolerance_for(p));
  INFO(r.summary("paged", s.describe()));
  CHECK(r.passed);
  // And the reference equals plain attention over the contiguous copy, by construction checked
  // against the textbook loops in attention_ref_test.
}

TEST_CASE("gemm CPU kernel matches the double reference and hand values", "[kernels][gemm]") {
  const GemmShape tiny{.m = 2, .n = 2, .k = 3};
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> w = {1, 0, -1, 0.5f, 0.5f, 0.5f};  // rows are output features
  std::vector<float> y(4);
  gemm_reference(tiny, x, w, y);
  CHECK(y == std::vector<float>{-2, 3, -2, 7.5f});
  const GemmShape s{.m = 37, .n = 53, .k = 300};
  const Precision p = GENERATE(Precision::kFp16, Precision::kBf16);
  InputRng rng(3);
  const auto xs = random_values(rng, s.m * s.k, p);
  const auto ws = random_values(rng, s.n * s.k, p);
  std::vector<float> ref(size_t(s.m * s.n)), got(size_t(s.m * s.n));
  gemm_reference(s, xs, ws, ref);
  gemm_cpu(s, p, xs, ws, got);
  // Sums of 300 products of values in [-1, 1] reach ~10; the output's rounding dominates.
  const CheckReport r = check_close(ref, got, tolerance_for(p));
  INFO(r.summary("gemm", s.describe()));
  CHECK(r.passed);
}

TEST_CASE("bandwidth probe copy is exact and read sums every word", "[kernels][membw]") {
  std::vector<uint64_t> src(1003);
  InputRng rng(4);
  for (auto& w : src) w = rng.next_u64();
  std::vector<uint64_t> dst(src.size());
  membw_copy_cpu(src, dst);
  CHECK(dst == src);
  uint64_t sum = 0;
  for (uint64_t w : src) sum += w;
  CHECK(membw_read_cpu(src) == sum);
}
