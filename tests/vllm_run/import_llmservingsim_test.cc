// `kvsim-validate import llmservingsim` on a hand-written bundle (tests/data/llmservingsim/tiny:
// made-up times in LLMServingSim's layout): which rows become which cases, the train/test split,
// the sampler line, the profile written and the held-out report.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "models/latency/profile.h"
#include "validate/measurements.h"
#include "validate/vllm_run/import_llmservingsim.h"

using namespace kvsim;
using namespace kvsim::validate;
using Catch::Matchers::Contains;

namespace {
const std::filesystem::path kBundle =
    std::filesystem::path(KVSIM_TEST_DATA) / "llmservingsim" / "tiny" / "bf16";

std::filesystem::path out_dir() {
  const auto d =
      std::filesystem::temp_directory_path() / ("kvsim-import-lss-" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d;
}
}  // namespace

TEST_CASE("import llmservingsim: cases, split, sampler line, profile and held-out report",
          "[vllm_run][import]") {
  const auto out = out_dir();
  LlmservingsimImportOptions o;
  o.input = kBundle;
  o.out_dir = out;
  o.quiet = true;
  run_import_llmservingsim(o);

  // 9 dense ops x 4 token counts + 4 lm_head rows + 4 prefill-only + 4 decode-only attention
  // rows = 48 cases; the sampler and the 4 mixed rows are not cases.
  const std::vector<Measurement> rows = read_measurements(out / "measurements.csv");
  REQUIRE(rows.size() == 48);
  int gemm = 0, copy = 0, flash = 0, decode = 0, test = 0;
  for (const Measurement& m : rows) {
    gemm += m.c.kind == validate::KernelClass::kGemm;
    copy += m.c.kind == validate::KernelClass::kMembwCopy;
    flash += m.c.kind == validate::KernelClass::kFlash;
    decode += m.c.kind == validate::KernelClass::kPagedDecode;
    test += m.c.split == "test";
  }
  CHECK(gemm == 4 * 4 + 4);  // qkv, o, gate_up, down at 4 token counts; lm_head at 4 counts
  CHECK(copy == 5 * 4);      // embedding, layernorm, rotary, act_fn, final_layernorm
  CHECK(flash == 4);
  CHECK(decode == 4);
  CHECK(test == 24);  // every other token count and every other attention row
  // qkv_proj of Llama-3.1-8B at 8 tokens: m = 8, k = 4,096, n = 4,096 + 2 x 1,024 = 6,144.
  bool seen = false;
  for (const Measurement& m : rows) {
    if (m.c.kind == validate::KernelClass::kGemm && m.c.gemm.m == 8 && m.c.gemm.n == 6144) {
      seen = m.c.gemm.k == 4096;
    }
  }
  CHECK(seen);

  // The sampler is exactly 20 + 0.5 n: the train rows (n = 1, 4) give that line, and the step
  // overhead is its constant plus vLLM's host overhead per step (1,900 us, fitted once).
  const Profile p = load_profile(out / "profile.yaml");
  CHECK(p.gpu == "rtx-pro-6000");  // meta.yaml's display name matched in the catalog
  CHECK(p.per_sequence_overhead_s == Approx(0.5e-6));
  CHECK(p.iteration_overhead_s == Approx(20e-6 + 1900e-6));
  // Attention from the kernel's tiles, the mixed batches' decodes inside it: no decode factor.
  CHECK(p.flash_tiles.fitted);
  CHECK(p.mixed_decode_slope_factor == 1.0);
  const auto j = nlohmann::json::parse(std::ifstream(out / "heldout.json"));
  CHECK(j["by_class"]["sampler"]["mape"].get<double>() == Approx(0).margin(1e-9));
  CHECK(j["by_class"]["attention_mixed"]["rows"] == 4);  // every mixed row: none is fitted
  CHECK(j["model"] == "llama-3.1-8b");
  std::filesystem::remove_all(out);
}

TEST_CASE("import llmservingsim: a folder without meta.yaml or a GPU the catalog lacks",
          "[vllm_run][import][bad-input]") {
  LlmservingsimImportOptions o;
  o.out_dir = out_dir();
  o.quiet = true;
  o.input = kBundle / "tp1";  // a tpN folder: its parent holds meta.yaml, so this works
  CHECK_NOTHROW(run_import_llmservingsim(o));
  o.input = std::filesystem::path(KVSIM_TEST_DATA) / "llmservingsim";
  CHECK_THROWS_WITH(run_import_llmservingsim(o), Contains("no meta.yaml"));
  o.input = kBundle;
  o.gpu = "no-such-gpu";
  CHECK_THROWS_AS(run_import_llmservingsim(o), InputError);
  std::filesystem::remove_all(o.out_dir);
}
