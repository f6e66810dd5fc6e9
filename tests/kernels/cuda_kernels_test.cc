// Every CUDA kernel version against the CPU references, on small random shapes that cross the
// tile sizes. Tagged [gpu]: without a device (or without a CUDA build) each test prints why and
// ctest lists it as skipped (tests/gpu_skip.h).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kernels/cpu_ref/attention_ref.h"
#include "kernels/cpu_ref/gemm_ref.h"
#include "kernels/cpu_ref/paged_decode_ref.h"
#include "kernels/cpu_ref/random_inputs.h"
#include "kernels/cpu_ref/tolerance.h"
#include "tests/gpu_skip.h"
#ifdef KVSIM_HAVE_CUDA
#include "kernels/cuda_api.h"
#endif

using namespace kvsim::kernels;

namespace {

[[maybe_unused]] std::vector<AttentionShape> attention_shapes() {
  std::vector<AttentionShape> out;
  for (int64_t d : {64, 128}) {
    for (bool causal : {false, true}) {
      out.push_back({.batch = 2,
                     .heads = 4,
                     .kv_heads = 4,
                     .seq_q = 130,
                     .seq_kv = 130,
                     .head_dim = d,
                     .causal = causal});  // MHA, 2 full tiles + a tail of 2
      out.push_back({.batch = 1,
                     .heads = 8,
                     .kv_heads = 2,
                     .seq_q = 77,
                     .seq_kv = 200,
                     .head_dim = d,
                     .causal = causal});  // GQA-4, seq_q < seq_kv
      out.push_back({.batch = 1,
                     .heads = 4,
                     .kv_heads = 1,
                     .seq_q = 1,
                     .seq_kv = 65,
                     .head_dim = d,
                     .causal = causal});  // MQA, one query row
    }
  }
  return out;
}

}  // namespace

TEST_CASE("CUDA native and flash attention match the reference", "[gpu][kernels]") {
  if (!kvsim::test::gpu_available_or_skip()) return;
#ifdef KVSIM_HAVE_CUDA
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    uint64_t seed = 1;
    for (const AttentionShape& s : attention_shapes()) {
      InputRng rng(seed++);
      const auto q = random_values(rng, s.q_elements(), p);
      const auto k = random_values(rng, s.kv_elements(), p);
      const auto v = random_values(rng, s.kv_elements(), p);
      std::vector<float> ref(q.size());
      attention_reference(s, q, k, v, ref);
      for (int ver : cuda::versions("native")) {
        const CheckReport r =
            check_close(ref, cuda::run_native_attention(ver, s, p, q, k, v), tolerance_for(p));
        INFO(r.summary("native v" + std::to_string(ver) + " " + std::string(precision_name(p)),
                       s.describe()));
        CHECK(r.passed);
      }
      for (int ver : cuda::versions("flash")) {
        const CheckReport r =
            check_close(ref, cuda::run_flash_attention(ver, s, p, q, k, v), tolerance_for(p));
        INFO(r.summary("flash v" + std::to_string(ver) + " " + std::string(precision_name(p)),
                       s.describe()));
        CHECK(r.passed);
      }
    }
  }
#endif
}

TEST_CASE("CUDA paged decode matches the reference for block sizes 8..64", "[gpu][kernels]") {
  if (!kvsim::test::gpu_available_or_skip()) return;
#ifdef KVSIM_HAVE_CUDA
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    for (int64_t block : {8, 16, 24, 32, 64}) {
      for (int64_t d : {64, 128}) {
        const PagedDecodeShape s{.batch = 3,
                                 .heads = 8,
                                 .kv_heads = 2,
                                 .head_dim = d,
                                 .context = 301,
                                 .block_size = block};
        InputRng rng(static_cast<uint64_t>(block * 1000 + d));
        const auto q = random_values(rng, s.batch * s.heads * s.head_dim, p);
        const auto kc = random_values(rng, s.cache_elements(), p);
        const auto vc = random_values(rng, s.cache_elements(), p);
        const auto table = shuffled_block_table(s, rng);
        std::vector<float> ref(q.size());
        paged_decode_reference(s, q, kc, vc, table, ref);
        for (int ver : cuda::versions("paged_decode")) {
          const CheckReport r = check_close(
              ref, cuda::run_paged_decode(ver, s, p, q, kc, vc, table), tolerance_for(p));
          INFO(r.summary("paged v" + std::to_string(ver), s.describe()));
          CHECK(r.passed);
        }
      }
    }
  }
#endif
}

// The varlen entry point (the replay's decode attention): three sequences of 1, 77 and 301
// tokens in one launch, their tables packed at the longest's stride, Q and O rows padded (as the
// replay reads Q from its qkv rows). Each sequence is checked against the reference on its own:
// its blocks copied out of the shared cache into a compact one, its table 0, 1, ...; the padding
// of O must stay zero.
TEST_CASE("CUDA paged decode over sequences of different lengths matches the reference",
          "[gpu][kernels]") {
  if (!kvsim::test::gpu_available_or_skip()) return;
#ifdef KVSIM_HAVE_CUDA
  const std::vector<int32_t> contexts = {1, 77, 301};
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    for (int64_t d : {64, 128}) {
      const PagedDecodeShape whole{
          .batch = 3, .heads = 8, .kv_heads = 2, .head_dim = d, .context = 301, .block_size = 16};
      cuda::PagedDecodeVarlenShape s;
      s.batch = 3;
      s.heads = 8;
      s.kv_heads = 2;
      s.head_dim = d;
      s.block_size = 16;
      s.table_stride = whole.blocks_per_seq();
      s.q_stride = 8 * d + 8;
      s.o_stride = 8 * d + 16;
      InputRng rng(static_cast<uint64_t>(7000 + d));
      const auto q = random_values(rng, s.batch * s.q_stride, p);
      const auto kc = random_values(rng, whole.cache_elements(), p);
      const auto vc = random_values(rng, whole.cache_elements(), p);
      const auto table = shuffled_block_table(whole, rng);
      const std::vector<float> got =
          cuda::run_paged_decode_varlen(1, s, p, q, kc, vc, table, contexts);
      const int64_t block_elements = s.kv_heads * s.block_size * d;
      for (int64_t b = 0; b < s.batch; ++b) {
        const PagedDecodeShape one{.batch = 1,
                                   .heads = 8,
                                   .kv_heads = 2,
                                   .head_dim = d,
                                   .context = contexts[static_cast<size_t>(b)],
                                   .block_size = 16};
        std::vector<float> k1, v1;
        std::vector<int32_t> t1;
        for (int64_t j = 0; j < one.blocks_per_seq(); ++j) {
          const int64_t from = table[static_cast<size_t>(b * s.table_stride + j)] * block_elements;
          k1.insert(k1.end(), kc.begin() + from, kc.begin() + from + block_elements);
          v1.insert(v1.end(), vc.begin() + from, vc.begin() + from + block_elements);
          t1.push_back(static_cast<int32_t>(j));
        }
        const std::vector<float> q1(q.begin() + b * s.q_stride, q.begin() + b * s.q_stride + 8 * d);
        std::vector<float> ref(q1.size());
        paged_decode_reference(one, q1, k1, v1, t1, ref);
        const auto row = got.begin() + b * s.o_stride;
        const std::vector<float> o1(row, row + 8 * d);
        const CheckReport r = check_close(ref, o1, tolerance_for(p));
        INFO(r.summary("paged varlen v1 seq " + std::to_string(b), one.describe()));
        CHECK(r.passed);
        for (int64_t e = 8 * d; e < s.o_stride; ++e) CHECK(row[e] == 0.0f);
      }
    }
  }
#endif
}

TEST_CASE("CUDA GEMMs match the reference", "[gpu][kernels]") {
  if (!kvsim::test::gpu_available_or_skip()) return;
#ifdef KVSIM_HAVE_CUDA
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    for (const GemmShape& s :
         {GemmShape{.m = 1, .n = 256, .k = 512}, GemmShape{.m = 77, .n = 384, .k = 256},
          GemmShape{.m = 512, .n = 128, .k = 1024}}) {
      InputRng rng(static_cast<uint64_t>(s.m + s.n));
      const auto x = random_values(rng, s.m * s.k, p);
      const auto w = random_values(rng, s.n * s.k, p);
      std::vector<float> ref(static_cast<size_t>(s.m * s.n));
      gemm_reference(s, x, w, ref);
      for (int ver : cuda::versions("gemm")) {
        const CheckReport r = check_close(ref, cuda::run_gemm(ver, s, p, x, w), tolerance_for(p));
        INFO(r.summary("gemm v" + std::to_string(ver), s.describe()));
        CHECK(r.passed);
      }
    }
  }
#endif
}

TEST_CASE("CUDA bandwidth probe copies exactly and reads every word", "[gpu][kernels]") {
  if (!kvsim::test::gpu_available_or_skip()) return;
#ifdef KVSIM_HAVE_CUDA
  std::vector<uint64_t> words(size_t{1} << 20);  // 8 MiB
  InputRng rng(6);
  for (auto& w : words) w = rng.next_u64();
  for (int ver : cuda::versions("membw")) CHECK(cuda::run_membw_roundtrip(ver, words));
#endif
}

TEST_CASE("an unknown kernel version is an input error", "[gpu][kernels]") {
  if (!kvsim::test::gpu_available_or_skip()) return;
#ifdef KVSIM_HAVE_CUDA
  const AttentionShape s{
      .batch = 1, .heads = 1, .kv_heads = 1, .seq_q = 8, .seq_kv = 8, .head_dim = 64};
  std::vector<float> z(static_cast<size_t>(s.q_elements()));
  REQUIRE_THROWS_WITH(cuda::run_flash_attention(9, s, Precision::kFp16, z, z, z),
                      Catch::Matchers::Contains("unknown kernel version 9"));
#endif
}
