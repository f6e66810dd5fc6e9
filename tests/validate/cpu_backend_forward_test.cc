// The CPU backend times the replay's CPU forward pass's own attention (validate/paged_attention.h),
// so its flash and paged_decode cases must produce exactly what that code produces on the same
// inputs: here the forward's paged_chunk_attention runs over a PagedKvPool filled with the case's
// K and V, and every output float is compared for equality (fp32 cases: nothing is rounded).
// Also: fp32 cases move twice the bytes of fp16 ones, and the grid accepts `fp32`.
#include <catch2/catch.hpp>

#include <vector>

#include "models/model_spec.h"
#include "validate/backend.h"
#include "validate/grid.h"
#include "validate/kernel_case.h"
#include "validate/paged_attention.h"
#include "validate/paged_kv_pool.h"

using namespace kvsim;
using namespace kvsim::validate;
using kernels::Precision;

namespace {

ModelSpec one_layer(int heads, int kv_heads, int head_dim) {
  ModelSpec m;
  m.layers = 1;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = head_dim;
  return m;
}

}  // namespace

TEST_CASE("cpu backend: a flash case's output is the forward pass's chunk attention, bit for bit",
          "[validate][cpu_backend]") {
  // B=2, H=4, Hkv=2 (GQA groups of 2), 5 new tokens after 4 cached (Skv=9), causal bottom-right:
  // token i sees keys 0 .. 4 + i, as the forward's chunk after kv_before = 4 tokens.
  KernelCase c;
  c.kind = KernelClass::kFlash;
  c.version = 0;
  c.precision = Precision::kFp32;
  c.attn = {.batch = 2,
            .heads = 4,
            .kv_heads = 2,
            .seq_q = 5,
            .seq_kv = 9,
            .head_dim = 64,
            .causal = true};
  const CaseInputs in = make_case_inputs(c, 7);
  const std::vector<float> got = make_cpu_backend()->run_for_check(c, in);
  REQUIRE(got.size() == in.a.size());

  const int64_t H = 4, Hkv = 2, Sq = 5, Skv = 9, D = 64;
  PagedKvPool pool(one_layer(4, 2, 64), /*block_tokens=*/4, /*num_blocks=*/8, /*seed=*/3);
  AttentionScratch scratch;
  for (int64_t b = 0; b < 2; ++b) {
    pool.reserve(b, Skv);  // 3 blocks of 4, scattered by the shuffled free list
    const auto table = pool.block_table(b);
    for (int64_t j = 0; j < Skv; ++j) {
      for (int kvh = 0; kvh < Hkv; ++kvh) {
        for (int64_t x = 0; x < D; ++x) {
          const auto at = static_cast<size_t>(((b * Hkv + kvh) * Skv + j) * D + x);
          pool.k_at(0, table, j, kvh)[x] = in.b[at];
          pool.v_at(0, table, j, kvh)[x] = in.c[at];
        }
      }
    }
    // The forward's Q and O are [token, heads, head_dim]; the case's [heads, seq_q, head_dim].
    std::vector<float> q(static_cast<size_t>(Sq * H * D)), o(q.size());
    for (int64_t i = 0; i < Sq; ++i) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t x = 0; x < D; ++x) {
          q[static_cast<size_t>((i * H + h) * D + x)] =
              in.a[static_cast<size_t>(((b * H + h) * Sq + i) * D + x)];
        }
      }
    }
    paged_chunk_attention(pool, 0, table, AttentionDims{4, 2, 64}, /*kv_before=*/4,
                          /*new_tokens=*/5, q.data(), H * D, o.data(), H * D, scratch);
    int differ = 0;
    for (int64_t i = 0; i < Sq; ++i) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t x = 0; x < D; ++x) {
          differ += o[static_cast<size_t>((i * H + h) * D + x)] !=
                    got[static_cast<size_t>(((b * H + h) * Sq + i) * D + x)];
        }
      }
    }
    CHECK(differ == 0);
  }
}

TEST_CASE(
    "cpu backend: a paged_decode case's output is the forward pass's decode attention, bit "
    "for bit",
    "[validate][cpu_backend]") {
  // B=3 sequences of 10 tokens in blocks of 4 (3 blocks each, the last holding 2), H=4 over one KV
  // head (MQA): each is a decode token at position 9 after kv_before = 9 tokens.
  KernelCase c;
  c.kind = KernelClass::kPagedDecode;
  c.version = 0;
  c.precision = Precision::kFp32;
  c.paged = {.batch = 3, .heads = 4, .kv_heads = 1, .head_dim = 64, .context = 10, .block_size = 4};
  const CaseInputs in = make_case_inputs(c, 11);
  const std::vector<float> got = make_cpu_backend()->run_for_check(c, in);
  REQUIRE(got.size() == in.a.size());

  const int64_t H = 4, D = 64, ctx = 10, bs = 4, per_seq = 3;
  PagedKvPool pool(one_layer(4, 1, 64), 4, 16, 5);
  AttentionScratch scratch;
  for (int64_t b = 0; b < 3; ++b) {
    pool.reserve(b, ctx);
    const auto table = pool.block_table(b);
    for (int64_t j = 0; j < ctx; ++j) {
      const int64_t block = in.table[static_cast<size_t>(b * per_seq + j / bs)];
      for (int64_t x = 0; x < D; ++x) {
        const auto at = static_cast<size_t>((block * bs + j % bs) * D + x);  // one KV head
        pool.k_at(0, table, j, 0)[x] = in.b[at];
        pool.v_at(0, table, j, 0)[x] = in.c[at];
      }
    }
    std::vector<float> o(static_cast<size_t>(H * D));
    paged_chunk_attention(pool, 0, table, AttentionDims{4, 1, 64}, /*kv_before=*/9,
                          /*new_tokens=*/1, &in.a[static_cast<size_t>(b * H * D)], H * D, o.data(),
                          H * D, scratch);
    int differ = 0;
    for (int64_t e = 0; e < H * D; ++e)
      differ += o[static_cast<size_t>(e)] != got[static_cast<size_t>(b * H * D + e)];
    CHECK(differ == 0);
  }
}

TEST_CASE(
    "cpu backend: flash (causal and not) and paged_decode pass the reference check at fp32, "
    "fp16 and bf16",
    "[validate][cpu_backend]") {
  auto backend = make_cpu_backend();
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
    for (bool causal : {true, false}) {
      KernelCase c;
      c.kind = KernelClass::kFlash;
      c.version = 0;
      c.precision = p;
      // 70 query tokens: two tiles of the forward's 64 (the second of 6), after 30 cached keys.
      c.attn = {.batch = 1,
                .heads = 6,
                .kv_heads = 2,
                .seq_q = 70,
                .seq_kv = 100,
                .head_dim = 128,
                .causal = causal};
      const auto r = check_case(*backend, c, 3);
      CHECK(r.passed);
      CHECK(r.bad == 0);
    }
    KernelCase d;
    d.kind = KernelClass::kPagedDecode;
    d.version = 0;
    d.precision = p;
    d.paged = {
        .batch = 2, .heads = 8, .kv_heads = 2, .head_dim = 128, .context = 37, .block_size = 16};
    CHECK(check_case(*backend, d, 4).passed);
  }
}

TEST_CASE("fp32 cases move 4 bytes per element: twice fp16's", "[validate][cpu_backend]") {
  KernelCase g;
  g.kind = KernelClass::kGemm;
  g.gemm = {.m = 2, .n = 3, .k = 4};
  // X [2, 4] + W [3, 4] + Y [2, 3] = 8 + 12 + 6 = 26 elements: 52 bytes at fp16, 104 at fp32.
  CHECK(g.bytes_moved() == 52.0);
  g.precision = Precision::kFp32;
  CHECK(g.bytes_moved() == 104.0);
  CHECK(g.flops() == 48.0);  // 2 x 2 x 3 x 4, whatever the precision

  KernelCase f;
  f.kind = KernelClass::kFlash;
  f.attn = {.batch = 1,
            .heads = 1,
            .kv_heads = 1,
            .seq_q = 2,
            .seq_kv = 2,
            .head_dim = 64,
            .causal = true};
  // Q and O (128 elements each) + K and V (128 each) = 512 elements: 1024 bytes, 2048 at fp32.
  CHECK(f.bytes_moved() == 1024.0);
  f.precision = Precision::kFp32;
  CHECK(f.bytes_moved() == 2048.0);

  KernelCase d;
  d.kind = KernelClass::kPagedDecode;
  d.paged = {.batch = 1, .heads = 1, .kv_heads = 1, .head_dim = 64, .context = 4, .block_size = 4};
  // K and V of 4 tokens x 64 (512 elements) + Q and O (128) = 640 elements, plus the 1-entry
  // int32 block table (4 bytes, whatever the precision): 1284 at fp16, 2564 at fp32.
  CHECK(d.bytes_moved() == 1284.0);
  d.precision = Precision::kFp32;
  CHECK(d.bytes_moved() == 2564.0);
}

TEST_CASE("grids accept dtype fp32", "[validate][grid]") {
  const Grid g = parse_grid(
      "name: t\nkernels:\n  - {class: gemm, dtypes: [fp32, fp16], m: [1], n: [8], k: [8]}\n",
      "g.yaml", "cpu");
  REQUIRE(g.cases.size() == 2);
  CHECK(g.cases[0].precision == Precision::kFp32);
  CHECK(g.cases[0].describe() == "gemm v0 fp32 M=1 N=8 K=8");
  CHECK(g.cases[1].precision == Precision::kFp16);
  REQUIRE_THROWS_WITH(
      parse_grid("name: t\nkernels:\n  - {class: gemm, dtypes: [fp64], m: [1], n: [8], k: [8]}\n",
                 "g.yaml", "cpu"),
      Catch::Contains("g.yaml:3:"));
}
