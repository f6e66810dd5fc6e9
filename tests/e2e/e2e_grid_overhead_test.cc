// The e2e calibration grid generated from a scenario's model and engine, and the per-iteration
// overhead fitted from whole iterations with a fake clock.
#include <catch2/catch.hpp>

#include "core/config_node.h"
#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "sim/config/scenario.h"
#include "validate/grid.h"
#include "validate/replay/e2e_grid.h"
#include "validate/replay/e2e_overhead.h"

using namespace kvsim;
using namespace kvsim::validate;

namespace {

// Llama-3-8B (32 heads, 8 KV heads of 128, hidden 4096, ffn 14336, vocab 128256, max_position
// 8192); the top-level engine says block 32, the first policy's engine block 8 (it wins).
const char* kScenario = R"(name: grid
model: llama-3-8b
gpu: a100-sxm4-80gb
engine: {kv: {type: paged, block_size: 32}, max_num_batched_tokens: 100}
workload:
  arrivals: {type: fixed, rate: 1}
  max_requests: 1
  prompt_tokens: 16
  output_tokens: 4
policies: [{name: p, engine: {kv: {type: paged, block_size: 8}}, guards: []}]
)";

}  // namespace

TEST_CASE("e2e grid: the model's GEMMs, attention and decode at the engine's shapes",
          "[e2e_grid]") {
  const Scenario s =
      load_scenario(ConfigNode::parse_string(kScenario, "grid.yaml"), Catalog::builtin());
  const E2eShapes sh = e2e_shapes(s);
  CHECK(sh.block_tokens == 8);
  CHECK(sh.max_batched_tokens == 100);
  CHECK_FALSE(sh.native_attention);
  const Grid g = parse_grid(e2e_grid_yaml(s, "cpu"), "e2e.yaml", "cpu");
  // Rows up to 100 batched tokens: m = 1, 4, 16, 64 for qkv, o, gate_up, down (16 cases) and
  // lm_head (4); flash chunks 16 and 64 after 0 and 256 cached tokens (4); paged decode batches
  // 1, 8, 32 x contexts 32, 128, 512, 2048 (all <= 8192) (12); 6 copies (0.25 to 256 MiB).
  // 20 + 4 + 12 + 6 = 42.
  REQUIRE(g.cases.size() == 42);
  int gemm = 0, flash = 0, paged = 0, copy = 0;
  for (const KernelCase& c : g.cases) {
    gemm += c.kind == KernelClass::kGemm;
    flash += c.kind == KernelClass::kFlash;
    paged += c.kind == KernelClass::kPagedDecode;
    copy += c.kind == KernelClass::kMembwCopy;
  }
  CHECK(gemm == 20);
  CHECK(flash == 4);
  CHECK(paged == 12);
  CHECK(copy == 6);
  // qkv: n = (32 + 2 x 8) x 128 = 6144, k = 4096; lm_head: n = 128256; decode at block 8.
  CHECK(g.cases[0].gemm.n == 6144);
  CHECK(g.cases[0].gemm.k == 4096);
  CHECK(g.cases[16].gemm.n == 128256);
  CHECK(g.cases[24].paged.block_size == 8);
  CHECK(g.timing.repetitions == 5);
  // On cuda: the GPU timing (15 repetitions, L2 flushed) and flash v2, the tiled kernel.
  const Grid gpu = parse_grid(e2e_grid_yaml(s, "cuda"), "e2e.yaml", "cuda");
  REQUIRE(gpu.cases.size() == 42);
  CHECK(gpu.timing.repetitions == 15);
  CHECK(gpu.cases[20].kind == KernelClass::kFlash);
  CHECK(gpu.cases[20].version == 2);
}

namespace {

// Returns the modeled kernel time plus a per-probe remainder (probe = call / 5 rounds), and
// counts the releases.
class FakeClock : public IterationClock {
 public:
  explicit FakeClock(std::vector<double> extra) : extra_(std::move(extra)) {}
  double seconds(const ClockBatch& b) override {
    batches.push_back(b.prefill.size() * 100 + b.decode.size());
    return b.modeled->ops_seconds + extra_[calls_++ / 5];
  }
  void release(int64_t) override { ++released; }
  std::vector<size_t> batches;
  int released = 0;

 private:
  std::vector<double> extra_;
  int calls_ = 0;
};

}  // namespace

TEST_CASE("e2e overhead: the median remainder over the probes, never negative", "[e2e_overhead]") {
  const Catalog& cat = Catalog::builtin();
  const GpuSpec gpu = cat.gpu("a100-sxm4-80gb");
  const LatencyModel lm(cat.model("llama-3-8b"), gpu, default_profile(gpu), AttentionKind::kFlash);
  // Remainders 1, 3 and 2 ms on the three probes: the median is 2 ms.
  FakeClock clock({0.001, 0.003, 0.002});
  const OverheadFit fit = fit_iteration_overhead(clock, lm, 16);
  CHECK(fit.iteration_overhead_s == Approx(0.002).margin(1e-15));
  REQUIRE(fit.probes.size() == 3);
  CHECK(fit.probes[0].name == "decode 1 x 32");
  CHECK(fit.probes[1].measured_s - fit.probes[1].ops_s == Approx(0.003).margin(1e-15));
  // 5 rounds of: 1 decode sequence, 4 decode sequences, 1 prefill (encoded 100 x prefill + decode);
  // every round releases its ids: 5 x (1 + 4 + 1) = 30.
  REQUIRE(clock.batches.size() == 15);
  CHECK(clock.batches[0] == 1);
  CHECK(clock.batches[5] == 4);
  CHECK(clock.batches[10] == 100);
  CHECK(clock.released == 30);
  // Faster than the kernels' model on every probe: the overhead is 0, not negative.
  FakeClock fast({-1e-4, -2e-4, -3e-4});
  CHECK(fit_iteration_overhead(fast, lm, 16).iteration_overhead_s == 0.0);
}

TEST_CASE("e2e grid: a float32 model calibrates fp32 cases on the CPU, fp16 on a GPU",
          "[e2e_grid]") {
  // llama-tiny's weights and KV are fp32 (models.yaml): the CPU forward reads 4 bytes per
  // element, so every GEMM, flash and paged_decode case is fp32 there; the copies stay byte
  // probes (fp16, "bytes are bytes"); on cuda the kernels are fp16 as for every model.
  const Scenario s = load_scenario(
      ConfigNode::parse_string("name: t\nmodel: llama-tiny\ngpu: a100-sxm4-80gb\nworkload:\n  "
                               "arrivals: {type: fixed, rate: 1}\n"
                               "  max_requests: 1\n  prompt_tokens: 16\n  output_tokens: 4\n",
                               "t.yaml"),
      Catalog::builtin());
  const Grid cpu = parse_grid(e2e_grid_yaml(s, "cpu"), "e2e.yaml", "cpu");
  const Grid gpu = parse_grid(e2e_grid_yaml(s, "cuda"), "e2e.yaml", "cuda");
  REQUIRE(cpu.cases.size() == gpu.cases.size());
  int fp32 = 0;
  for (size_t i = 0; i < cpu.cases.size(); ++i) {
    const bool copy = cpu.cases[i].kind == KernelClass::kMembwCopy;
    CHECK(cpu.cases[i].precision == (copy ? kernels::Precision::kFp16 : kernels::Precision::kFp32));
    CHECK(gpu.cases[i].precision == kernels::Precision::kFp16);
    fp32 += !copy;
  }
  CHECK(fp32 == static_cast<int>(cpu.cases.size()) - 6);
}
