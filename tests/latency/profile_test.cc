// Profiles: the shipped A100 file matches the built-in defaults, the writer round-trips, one
// efficiency changes exactly the operations of its class, tables interpolate, errors point.
#include <catch2/catch.hpp>

#include <fstream>

#include "core/data_path.h"
#include "core/errors.h"
#include "tests/latency/latency_test_util.h"

using namespace kvsim;
using Catch::Matchers::Contains;
using kvsim::test::decode_batch;
using kvsim::test::prefill_batch;

namespace {

void check_same_numbers(const Profile& a, const Profile& b) {
  for (size_t i = 0; i < kNumOpClasses; ++i) {
    INFO(op_class_name(static_cast<OpClass>(i)));
    CHECK(a.classes[i].compute_efficiency == Approx(b.classes[i].compute_efficiency));
    CHECK(a.classes[i].memory_efficiency == Approx(b.classes[i].memory_efficiency));
    CHECK(a.classes[i].launch_overhead_s == Approx(b.classes[i].launch_overhead_s));
  }
  CHECK(a.flash_seq_half_tokens == Approx(b.flash_seq_half_tokens));
  CHECK(a.flash_head_dim_exponent == Approx(b.flash_head_dim_exponent));
  CHECK(a.decode_context_half_tokens == Approx(b.decode_context_half_tokens));
  CHECK(a.paged_block_half_tokens == Approx(b.paged_block_half_tokens));
  CHECK(a.native_score_passes == Approx(b.native_score_passes));
  CHECK(a.native_score_bytes == Approx(b.native_score_bytes));
  CHECK(a.iteration_overhead_s == Approx(b.iteration_overhead_s));
  CHECK(a.allreduce_latency_s == Approx(b.allreduce_latency_s));
  REQUIRE(a.tables.size() == b.tables.size());
  for (size_t i = 0; i < a.tables.size(); ++i) {
    CHECK(a.tables[i].op_class == b.tables[i].op_class);
    CHECK(a.tables[i].metric == b.tables[i].metric);
    CHECK(a.tables[i].axis == b.tables[i].axis);
    CHECK(a.tables[i].points == b.tables[i].points);
    CHECK(a.tables[i].source == b.tables[i].source);
  }
}

LatencyModel with_profile(const Profile& p, AttentionKind a = AttentionKind::kFlash, int tp = 1) {
  return LatencyModel(Catalog::builtin().model("mixtral-8x7b"),
                      Catalog::builtin().gpu("a100-sxm4-80gb"), p, a, tp);
}

// A batch that exercises every operation of a model.
BatchShape full_batch() {
  BatchShape b = prefill_batch(3000, 500, 2);
  b.decode = {{1000}, {20000}, {7}};
  b.block_tokens = 16;
  return b;
}

}  // namespace

TEST_CASE("every catalog GPU's shipped profile holds its built-in profile", "[latency][profile]") {
  for (const char* gpu : {"a100-sxm4-80gb", "a100-sxm4-40gb", "h100-sxm", "h200", "l40s", "a40",
                          "b200", "gb200", "h20", "mi300x", "mi325x", "l4"}) {
    INFO(gpu);
    const Profile file =
        load_profile(data_file(std::string("models/catalog/profiles/") + gpu + ".yaml"));
    const Profile builtin = default_profile(Catalog::builtin().gpu(gpu));
    check_same_numbers(file, builtin);
    CHECK(file.gpu == gpu);
    CHECK(file.name == builtin.name);
    for (const ClassParams& c : file.classes) CHECK_FALSE(c.source.empty());
  }
}

TEST_CASE("flash attention efficiency follows the GPU and the kernel generation",
          "[latency][profile]") {
  // FA2 on A100: 0.73 (230 of 312 TFLOP/s). H100: FA2 0.349 -> 0.349 x 989.4 x 16384/16896 =
  // 335 TFLOP/s at 16k keys (the FlashAttention-2 paper); FA3 0.772 -> 740 (FlashAttention-3).
  // vLLM's default on Hopper is FA3; FA3 on an A100 is refused.
  const Catalog& c = Catalog::builtin();
  const double curve = 16384.0 / (16384 + 512);
  CHECK(default_profile(c.gpu("a100-sxm4-80gb")).of(OpClass::kAttentionFlash).compute_efficiency ==
        0.73);
  const Profile fa2 = default_profile(c.gpu("h100-sxm"), FlashKernel::kFa2);
  const Profile fa3 = default_profile(c.gpu("h100-sxm"));
  CHECK(989.4 * fa2.of(OpClass::kAttentionFlash).compute_efficiency * curve ==
        Approx(334.8).epsilon(1e-3));
  CHECK(989.4 * fa3.of(OpClass::kAttentionFlash).compute_efficiency * curve ==
        Approx(740.7).epsilon(1e-3));
  CHECK(default_flash_kernel(c.gpu("h200")) == FlashKernel::kFa3);
  CHECK(default_flash_kernel(c.gpu("l40s")) == FlashKernel::kFa2);
  CHECK_THROWS_AS(default_profile(c.gpu("a100-sxm4-80gb"), FlashKernel::kFa3), InputError);
}

TEST_CASE("write_profile_yaml round-trips, tables included", "[latency][profile]") {
  Profile p = default_profile(Catalog::builtin().gpu("h100-sxm"));
  p.of(OpClass::kGemm).compute_efficiency = 0.6180339887498949;
  p.of(OpClass::kElementwise).launch_overhead_s = 2.5e-6;
  p.source = "calibration run \"x\"\nline two";
  p.tables.push_back({OpClass::kAttentionFlash,
                      TableMetric::kComputeEfficiency,
                      TableAxis::kSeqLen,
                      {{512, 0.41}, {2048, 0.6}, {16384, 0.72}},
                      "measured"});
  p.tables.push_back({OpClass::kAttentionDecode,
                      TableMetric::kMemoryEfficiency,
                      TableAxis::kBlockSize,
                      {{0, 0.85}, {16, 0.8}},
                      ""});
  const std::string text = write_profile_yaml(p);
  const Profile q = parse_profile(text, "roundtrip");
  check_same_numbers(p, q);
  CHECK(q.name == p.name);
  CHECK(q.gpu == "h100-sxm");
  CHECK(q.source == p.source);
  CHECK(q.of(OpClass::kGemm).compute_efficiency == p.of(OpClass::kGemm).compute_efficiency);
  CHECK(write_profile_yaml(q) == text);  // a fixed point
}

TEST_CASE("changing one class's efficiency changes exactly that class's operations",
          "[latency][profile]") {
  const Profile base = default_profile(Catalog::builtin().gpu("a100-sxm4-80gb"));
  for (size_t ci = 0; ci < kNumOpClasses; ++ci) {
    const OpClass cls = static_cast<OpClass>(ci);
    for (int metric = 0; metric < 2; ++metric) {
      Profile changed = base;
      double& eff =
          metric == 0 ? changed.of(cls).compute_efficiency : changed.of(cls).memory_efficiency;
      eff *= 0.5;
      for (AttentionKind a : {AttentionKind::kNative, AttentionKind::kFlash}) {
        const auto before = with_profile(base, a, 2).iteration(full_batch());
        const auto after = with_profile(changed, a, 2).iteration(full_batch());
        REQUIRE(before.ops.size() == after.ops.size());
        bool any_changed = false;
        for (size_t i = 0; i < before.ops.size(); ++i) {
          const OpCost& x = before.ops[i];
          const OpCost& y = after.ops[i];
          INFO("class " << op_class_name(cls) << " metric " << metric << " op " << x.name);
          if (x.op_class != cls) {
            CHECK(y.seconds == x.seconds);
          } else if (x.comm.source == CommSource::kMeasured) {
            // A collective timed from the GPU's measured curve (the A100's TP 2 all-reduce):
            // the profile's link efficiency is not used.
            CHECK(y.seconds == x.seconds);
          } else {
            // The rate of the named metric halves; the operation never gets faster.
            CHECK(y.seconds >= x.seconds);
            // GEMMs are tiled: at half the rate the tile search may settle on another tiling,
            // so their compute time at least does not drop (it doubles for the same tiling).
            if (metric == 0 && cls == OpClass::kGemm) CHECK(y.compute_s >= x.compute_s);
            if (metric == 0 && cls != OpClass::kGemm) CHECK(y.compute_s == Approx(2 * x.compute_s));
            if (metric == 1 && x.bytes > 0) CHECK(y.memory_s == Approx(2 * x.memory_s));
            any_changed = any_changed || y.seconds > x.seconds;
          }
        }
        // Memory-bound classes must react to memory efficiency; compute-bound ones to compute.
        if ((cls == OpClass::kAttentionNative && a != AttentionKind::kNative) ||
            (cls == OpClass::kAttentionFlash && a != AttentionKind::kFlash)) {
          CHECK_FALSE(any_changed);
        }
      }
    }
  }
}

TEST_CASE("a table replaces the scalar efficiency and interpolates", "[latency][profile]") {
  EfficiencyTable t{OpClass::kGemm,
                    TableMetric::kComputeEfficiency,
                    TableAxis::kTokens,
                    {{16, 0.2}, {256, 0.6}, {4096, 0.8}},
                    ""};
  CHECK(t.at(1) == 0.2);
  CHECK(t.at(16) == 0.2);
  CHECK(t.at(136) == Approx(0.4));
  CHECK(t.at(4096) == 0.8);
  CHECK(t.at(1e6) == 0.8);
  // A table replaces the tile model with the plain roofline at the tabulated efficiency: compare
  // against a flat table at 0.75 (the A100's old scalar).
  Profile p = default_profile(Catalog::builtin().gpu("a100-sxm4-80gb"));
  Profile flat = p;
  flat.tables.push_back(
      {OpClass::kGemm, TableMetric::kComputeEfficiency, TableAxis::kTokens, {{1, 0.75}}, ""});
  const auto before = with_profile(flat).iteration(prefill_batch(136));
  p.tables.push_back(t);
  const auto after = with_profile(p).iteration(prefill_batch(136));
  const OpCost& x = kvsim::test::find_op(before, "qkv_proj");
  const OpCost& y = kvsim::test::find_op(after, "qkv_proj");
  CHECK(y.compute_s == Approx(x.compute_s * 0.75 / 0.4));
  CHECK(kvsim::test::find_op(after, "attention_prefill").seconds ==
        kvsim::test::find_op(before, "attention_prefill").seconds);
}

TEST_CASE("the flash curve: short sequences and small head dims run at lower efficiency",
          "[latency][profile]") {
  const auto m = kvsim::test::make_model("llama-3-8b");
  auto tflops = [&](int64_t s) {
    const IterationCost cost = m.iteration(prefill_batch(s));  // find_op returns into it
    const OpCost& a = kvsim::test::find_op(cost, "attention_prefill");
    return a.flops / (a.seconds - a.overhead_s);
  };
  CHECK(tflops(512) == Approx(312e12 * 0.73 * 0.5));
  CHECK(tflops(16384) == Approx(312e12 * 0.73 * 16384 / (16384 + 512)));
  CHECK(tflops(512) < tflops(4096));
}

TEST_CASE("profile errors name file, line and column", "[latency][profile][config]") {
  CHECK_THROWS_WITH(parse_profile("classes:\n  gemm:\n    compute_efficiency: 1.5\n", "p.yaml"),
                    Contains("p.yaml:3:25") && Contains("compute_efficiency"));
  CHECK_THROWS_WITH(parse_profile("classes:\n  gemm:\n    compute_eficiency: 0.5\n", "p.yaml"),
                    Contains("p.yaml:3:5") && Contains("did you mean 'compute_efficiency'"));
  CHECK_THROWS_WITH(parse_profile("classes:\n  gem: {}\n", "p.yaml"),
                    Contains("unknown key 'gem'"));
  CHECK_THROWS_WITH(
      parse_profile("tables:\n  - {class: attention_decode, metric: memory_efficiency,"
                    " axis: seq_len, points: [[1, 0.5]]}\n",
                    "p.yaml"),
      Contains("p.yaml:2") && Contains("cannot be tabulated over 'seq_len'"));
  CHECK_THROWS_WITH(parse_profile("tables:\n  - class: gemm\n    metric: compute_efficiency\n"
                                  "    axis: tokens\n    points: [[10, 0.5], [5, 0.6]]\n",
                                  "p.yaml"),
                    Contains("p.yaml:5") && Contains("strictly increasing"));
  CHECK_THROWS_WITH(parse_profile("overheads: {iteration_us: -1}\n", "p.yaml"),
                    Contains("p.yaml:1:27"));
  CHECK_THROWS_AS(load_profile("/nonexistent/profile.yaml"), InputError);
}

TEST_CASE("the elementwise latency terms round-trip and are written only when set",
          "[latency][profile]") {
  Profile p = default_profile(Catalog::builtin().gpu("rtx-pro-6000"));
  CHECK(write_profile_yaml(p).find("elementwise_cta_us") == std::string::npos);
  CHECK(write_profile_yaml(p).find("elementwise_serial_load_us") == std::string::npos);
  p.elementwise_l2_speedup = 6.5;
  p.elementwise_cta_s = 49e-9;
  p.elementwise_serial_load_s = 0.24e-6;
  const std::string text = write_profile_yaml(p);
  const Profile q = parse_profile(text, "roundtrip");
  CHECK(q.elementwise_l2_speedup == 6.5);
  CHECK(q.elementwise_cta_s == Approx(49e-9).epsilon(1e-12));
  CHECK(q.elementwise_serial_load_s == Approx(0.24e-6).epsilon(1e-12));
  CHECK(write_profile_yaml(q) == text);
}
