// The fused-MoE term: its fit from moe.csv (validate/vllm_run/moe_fit.h) on small synthetic files
// whose times follow the term exactly, the profile's routed_experts section read and written, the
// latency model costing a MoE layer with it, and the import writing it from a bundle's moe.csv.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/latency/fused_moe.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "validate/vllm_run/import_llmservingsim.h"
#include "validate/vllm_run/moe_fit.h"

using namespace kvsim;
using namespace kvsim::validate;
using Catch::Matchers::Contains;

namespace moe_fit_test {
std::filesystem::path temp_path(const std::string& stem) {
  return std::filesystem::temp_directory_path() / (stem + "-" + std::to_string(::getpid()));
}
}  // namespace moe_fit_test

TEST_CASE("fused-MoE fit: the even rows recover the term, the odd rows are held out",
          "[vllm_run][moe_fit]") {
  // A made-up expert: hidden 1,000, width 500, top-2, BF16, on a GPU of 1 TB/s and 100 TFLOP/s.
  // One expert's weights: 3 x 1,000 x 500 x 2 = 3 MB = 3 us at the peak; one routed row's
  // FLOPs: 2 x 1,000 x 3 x 500 = 3 MFLOP = 0.03 us at the peak. The times below are
  // 10 us + 3 us x E / 0.75 + 0.03 us x 2T / 0.5 = 10 + 4 E + 0.12 T:
  //   (T, E) = (1, 2): 18.12   (4, 2): 18.48   (4, 8): 42.48
  //            (16, 8): 43.92  (64, 16): 81.68  (256, 16): 104.72
  // The even rows (1, 2), (4, 8), (64, 16) fix the three unknowns exactly.
  const auto csv = moe_fit_test::temp_path("kvsim-moe-fit") += ".csv";
  auto write = [&](double t_16_8) {
    std::ofstream(csv) << "tokens,activated_experts,time_us\n1,2,18.12\n4,2,18.48\n4,8,42.48\n"
                       << "16,8," << t_16_8 << "\n64,16,81.68\n256,16,104.72\n";
  };
  const MoeShape shape{.hidden = 1000,
                       .expert_ffn = 500,
                       .topk = 2,
                       .bytes_per_weight = 2,
                       .hbm_bytes_per_s = 1e12,
                       .flops_per_s = 1e14};
  write(43.92);
  const std::vector<MoeRow> rows = read_moe_csv(csv);
  REQUIRE(rows.size() == 6);
  CHECK(rows[3].seconds == Approx(43.92e-6));
  MoeFit f = fit_routed_experts(rows, shape, "test");
  CHECK(f.train_rows == 3);
  REQUIRE(f.test.size() == 3);
  CHECK(f.cost.fitted);
  CHECK(f.cost.constant_s == Approx(10e-6).epsilon(1e-9));
  CHECK(f.cost.memory_efficiency == Approx(0.75).epsilon(1e-9));
  CHECK(f.cost.compute_efficiency == Approx(0.5).epsilon(1e-9));
  CHECK(f.test_predicted[2] == Approx(104.72e-6).epsilon(1e-9));  // (256, 16)
  CHECK(f.test_mape == Approx(0).margin(1e-9));

  // The held-out (16, 8) row measured 10% slower: predicted 43.92 against 48.312, an error of
  // 1 / 1.1 - 1 = -9.09%; MAPE over the three held-out rows 9.0909% / 3 = 3.0303%. The fit
  // (even rows) is unchanged.
  write(48.312);
  f = fit_routed_experts(read_moe_csv(csv), shape, "test");
  CHECK(f.cost.memory_efficiency == Approx(0.75).epsilon(1e-9));
  CHECK(f.test_mape == Approx((1 - 1 / 1.1) / 3).epsilon(1e-9));

  // Too few rows to fit three unknowns; a row with no experts.
  std::ofstream(csv) << "tokens,activated_experts,time_us\n1,2,18.12\n4,2,18.48\n4,8,42.48\n";
  CHECK_THROWS_WITH(fit_routed_experts(read_moe_csv(csv), shape, "t"), Contains("at least 3"));
  std::ofstream(csv) << "tokens,activated_experts,time_us\n1,0,18.12\n";
  CHECK_THROWS_WITH(read_moe_csv(csv), Contains(".csv:2: expected tokens >= 1"));
  std::filesystem::remove(csv);
}

TEST_CASE("the profile's routed_experts term: written, read back, and costing a MoE layer",
          "[vllm_run][moe_fit]") {
  const Catalog& c = Catalog::builtin();
  const GpuSpec gpu = c.gpu("rtx-pro-6000");
  Profile p = default_profile(gpu);
  CHECK_THAT(write_profile_yaml(p), !Contains("routed_experts"));  // absent unless fitted
  p.routed_experts = {.fitted = true,
                      .constant_s = 10e-6,
                      .memory_efficiency = 0.8,
                      .compute_efficiency = 0.6,
                      .source = "hand-written"};
  const Profile back = parse_profile(write_profile_yaml(p), "t");
  CHECK(back.routed_experts.fitted);
  CHECK(back.routed_experts.constant_s == Approx(10e-6));
  CHECK(back.routed_experts.memory_efficiency == 0.8);
  CHECK(back.routed_experts.compute_efficiency == 0.6);
  CHECK(back.routed_experts.source == "hand-written");

  // Qwen3-30B-A3B, one decode of 100 tokens: 1 token routes to 128 x (1 - (1 - 8/128)^1) = 8
  // experts, 8 rows. Weights 8 x 3 x 2,048 x 768 x 2 = 75,497,472 bytes; FLOPs 2 x 8 x 2,048 x
  // 3 x 768 = 75,497,472. Each of the 48 layers: 10 us + bytes / (BW x 0.8) + FLOPs / (peak x
  // 0.6), as one fused_moe op in place of the two expert GEMMs.
  const LatencyModel lm(c.model("qwen3-30b-a3b"), gpu, back, AttentionKind::kFlash);
  BatchShape b;
  b.block_tokens = 16;
  b.decode.push_back(DecodeSeq{100});
  const IterationCost it = lm.iteration(b, OpDetail::kFull);
  const double want = 48 * (10e-6 + 75'497'472.0 / (gpu.hbm_bytes_per_s * 0.8) +
                            75'497'472.0 / (gpu.fp16_flops * 0.6));
  bool fused = false;
  for (const OpCost& o : it.ops) {
    CHECK(o.name != "mlp_gate_up");
    if (o.name != "fused_moe") continue;
    fused = true;
    CHECK(o.seconds == Approx(want).epsilon(1e-12));
    CHECK(o.flops == Approx(48 * 75'497'472.0));
  }
  CHECK(fused);
  // The totals path (the engine's) agrees with the op list.
  CHECK(lm.iteration(b, OpDetail::kTotals).seconds == Approx(it.seconds).epsilon(1e-12));
}

TEST_CASE("import llmservingsim fits the term from a bundle's moe.csv and holds out half",
          "[vllm_run][moe_fit][import]") {
  // The hand-written tiny bundle (tests/data/llmservingsim/tiny) with a moe.csv added, read as
  // Qwen3-30B-A3B on the RTX PRO 6000 (hidden 2,048, experts of width 768, top-8): one expert's
  // weights and one routed row's FLOPs are both 9,437,184 (3 x 2,048 x 768 x 2 bytes; 2 x 2,048
  // x 3 x 768). Times 10 us + E x 9,437,184 / (BW x 0.9) + 8 T x 9,437,184 / (peak x 0.7).
  const GpuSpec gpu = Catalog::builtin().gpu("rtx-pro-6000");
  const auto bundle = moe_fit_test::temp_path("kvsim-moe-bundle") / "bf16";
  const auto out = moe_fit_test::temp_path("kvsim-moe-import");
  std::filesystem::remove_all(bundle.parent_path());
  std::filesystem::create_directories(bundle);
  const auto tiny = std::filesystem::path(KVSIM_TEST_DATA) / "llmservingsim" / "tiny" / "bf16";
  std::filesystem::copy(tiny, bundle, std::filesystem::copy_options::recursive);
  {
    std::ofstream moe(bundle / "tp1" / "moe.csv");
    moe << "tokens,activated_experts,time_us\n";
    for (auto [t, e] : {std::pair{1, 8}, {2, 16}, {16, 64}, {64, 128}, {256, 32}, {2048, 128}}) {
      const double s = 10e-6 + e * 9'437'184.0 / (gpu.hbm_bytes_per_s * 0.9) +
                       8.0 * t * 9'437'184.0 / (gpu.fp16_flops * 0.7);
      moe << t << ',' << e << ',' << fmt::format("{:.9f}", s * 1e6) << '\n';
    }
  }
  LlmservingsimImportOptions o;
  o.input = bundle;
  o.out_dir = out;
  o.model = "qwen3-30b-a3b";
  o.quiet = true;
  run_import_llmservingsim(o);
  const Profile p = load_profile(out / "profile.yaml");
  REQUIRE(p.routed_experts.fitted);
  CHECK(p.routed_experts.constant_s == Approx(10e-6).epsilon(1e-6));
  CHECK(p.routed_experts.memory_efficiency == Approx(0.9).epsilon(1e-6));
  CHECK(p.routed_experts.compute_efficiency == Approx(0.7).epsilon(1e-6));
  const auto j = nlohmann::json::parse(std::ifstream(out / "heldout.json"));
  CHECK(j["routed_experts"]["train_rows"] == 3);
  CHECK(j["by_class"]["fused_moe"]["rows"] == 3);
  CHECK(j["by_class"]["fused_moe"]["mape"].get<double>() == Approx(0).margin(1e-6));
  std::filesystem::remove_all(bundle.parent_path());
  std::filesystem::remove_all(out);
}
