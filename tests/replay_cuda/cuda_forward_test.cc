// The CUDA forward pass (validate/replay/cuda_forward.cu). The [gpu] tests run a tiny Llama-shaped
// model through chunked prefills, decodes and a release, and compare its logits with the CPU
// forward pass's (validate/replay/cpu_forward.h, float32) on the same weights and token ids.
// Without a device they print "gpu test skipped:" (tests/gpu_skip.h); the input-error test runs
// everywhere.
#include <catch2/catch.hpp>

#include <span>
#include <string>
#include <vector>

#include "core/errors.h"
#include "kernels/cpu_ref/tolerance.h"
#include "tests/gpu_skip.h"
#include "validate/replay/forward_pass.h"
#ifdef KVSIM_HAVE_CUDA
#include "validate/replay/cpu_forward.h"
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
  REQUIRE_THROWS_WITH(make_cuda_forward(tiny_setup(8)), Catch::Contains("built without CUDA"));
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

// The fp16 kernel tolerance (kernels/cpu_ref/tolerance) is for one kernel. Here the CPU pass is
// float32 throughout while the CUDA pass rounds its weights and some twenty stored tensors per
// token to fp16 (half an ulp each, 2^-12 relative) through two layers; logits are of order 0.3
// (h normalised, LM head weights of standard deviation 0.02: 0.02 sqrt(256)), so the absolute
// bound is five times the kernel table's atol (1e-2, some 40 fp16 ulps at 0.3) and the relative
// one its rtol.
kernels::Tolerance forward_tolerance() {
  const kernels::Tolerance k = kernels::tolerance_for(kernels::Precision::kFp16);
  return {5 * k.atol, k.rtol};
}

// Row `row` of both passes' logits, [rows, vocab].
void check_row(const std::vector<float>& ref, const std::vector<float>& got, int row, int vocab,
               const std::string& what) {
  REQUIRE(ref.size() == got.size());
  const auto r = std::span<const float>(ref).subspan(size_t(row) * vocab, size_t(vocab));
  const auto g = std::span<const float>(got).subspan(size_t(row) * vocab, size_t(vocab));
  const kernels::CheckReport rep = kernels::check_close(r, g, forward_tolerance());
  INFO(rep.summary(what, "vocab " + std::to_string(vocab)));
  CHECK(rep.passed);
}

}  // namespace

TEST_CASE(
    "CUDA forward logits match the CPU forward pass through chunked prefill, decode "
    "and release",
    "[gpu][replay]") {
  if (!kvsim::test::gpu_available_or_skip()) return;
  const ForwardSetup setup = tiny_setup(32);
  CpuForward cpu(setup);
  auto gpu = make_cuda_forward_pass(setup, &cpu.weights());  // the same weights, in fp16
  const int vocab = setup.model.vocab;

  // Iteration 1: request 1 prefills 40 tokens whole (3 blocks) and emits; request 2 prefills a
  // first chunk of 20 (2 blocks) and does not. One logits row: request 1 at position 39.
  ClockBatch b1;
  b1.prefill = {seq(1, 0, 40, true), seq(2, 0, 20, false)};
  std::vector<float> ref = cpu.run(b1);
  CHECK(gpu->seconds(b1) > 0);
  std::vector<float> got = gpu->last_logits();
  REQUIRE(got.size() == size_t{1} * 1000);
  check_row(ref, got, 0, vocab, "request 1 prefill (40 tokens)");

  // Iteration 2: request 2's second chunk, positions 20..32, attends to the 20 tokens in the
  // pool (across the block boundary at 16) plus itself, causally (bottom-right aligned); request
  // 1 decodes position 40 over 41 tokens of KV (3 blocks). Rows: request 2 at 32, request 1 at 40.
  ClockBatch b2;
  b2.prefill = {seq(2, 20, 13, true)};
  b2.decode = {seq(1, 40, 1, true)};
  ref = cpu.run(b2);
  CHECK(gpu->seconds(b2) > 0);
  got = gpu->last_logits();
  REQUIRE(got.size() == size_t{2} * 1000);
  check_row(ref, got, 0, vocab, "request 2 second chunk (33 tokens)");
  check_row(ref, got, 1, vocab, "request 1 decode (41 tokens)");

  // Iteration 3: request 1 is released and request 3 (5 tokens) reuses its blocks; request 2
  // decodes position 33 (34 tokens of KV).
  cpu.release(1);
  gpu->release(1);
  ClockBatch b3;
  b3.prefill = {seq(3, 0, 5, true)};
  b3.decode = {seq(2, 33, 1, true)};
  ref = cpu.run(b3);
  CHECK(gpu->seconds(b3) > 0);
  got = gpu->last_logits();
  REQUIRE(got.size() == size_t{2} * 1000);
  check_row(ref, got, 0, vocab, "request 3 prefill on reused blocks (5 tokens)");
  check_row(ref, got, 1, vocab, "request 2 decode (34 tokens)");
  CHECK(gpu->aliased_blocks() == 0);  // 3 + 3 + 1 blocks at most, of 32
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
