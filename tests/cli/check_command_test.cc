// `kvsim check`: the bad-scenario corpus (tests/data/bad/scenario/*.yaml, each with a .expected
// line) and the lints.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "tests/cli/run_cli.h"

using Catch::Matchers::Contains;
using kvsim::test::read_text;
using kvsim::test::run_cli;
using kvsim::test::trim;
namespace fs = std::filesystem;

TEST_CASE("every bad scenario gives its one-line error and exit code 2", "[cli][bad-input]") {
  const fs::path dir = fs::path(KVSIM_TEST_DATA) / "bad" / "scenario";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 15);
  for (const auto& f : files) {
    INFO("file " << f.filename());
    fs::path expected_file = f;
    expected_file.replace_extension(".expected");
    REQUIRE(fs::exists(expected_file));
    const std::string expected = trim(read_text(expected_file.string()));
    auto r = run_cli("check '" + f.string() + "'");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(expected));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // one line
    CHECK_THAT(r.err, Contains("kvsim: error: "));
  }
}

TEST_CASE("kvsim check finds the workload errors a run finds, but for trace rows",
          "[cli][bad-input]") {
  // check sets up every policy and the workload (opening a trace, reading its header) and stops
  // before the first event; only a bad row deep in a trace needs a run to be found.
  const fs::path dir = fs::path(KVSIM_TEST_DATA) / "bad" / "run";
  int checked = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const fs::path f = e.path();
    if (f.extension() != ".yaml") continue;
    INFO("file " << f.filename());
    const std::string expected =
        trim(read_text(fs::path(f).replace_extension(".expected").string()));
    auto r = run_cli("check '" + f.string() + "'");
    if (f.filename() == "unsorted-trace.yaml") {
      CHECK(r.exit_code == 0);
      continue;
    }
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(expected));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    ++checked;
  }
  CHECK(checked >= 8);
}

TEST_CASE("a missing scenario file is a clean error", "[cli][bad-input]") {
  auto r = run_cli("check /nonexistent/scenario.yaml");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("/nonexistent/scenario.yaml: no such file"));
}

TEST_CASE("kvsim check prints seed B's and seed A's lints as warnings", "[cli]") {
  auto r = run_cli(std::string("check '") + KVSIM_TEST_DATA + "/scenarios/lints.yaml'");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("lints.yaml:6:33: engine.kv.block_size 24 is not a multiple of 16"));
  CHECK_THAT(r.err, Contains("MHA model 'seed-7b-mha'"));
  CHECK_THAT(r.err, Contains("32768-token prompts"));
  // Generated traffic carries no prefix hashes: the cache can never hit.
  CHECK_THAT(r.err, Contains("lints.yaml:6:60: policies[0]: prefix caching is on but the workload "
                             "carries no prefix hashes"));
  // A paged pool is taken up front, so the kv_guard's free memory lies outside it.
  CHECK_THAT(r.err,
             Contains("lints.yaml:14:14: policies[0].guards[0]: kv_guard on the paged store, "
                      "which preallocates its KV pool"));
  CHECK_THAT(r.out, Contains("4 warnings"));
  auto l3 = run_cli(std::string("check '") + KVSIM_TEST_DATA + "/scenarios/lints-llama3.yaml'");
  REQUIRE(l3.exit_code == 0);
  CHECK_THAT(l3.err, Contains("kv_guard assumes 32 layers x 32 KV heads x head dim 128 but model "
                              "'llama-3-8b' has 32 x 8 x 128: its estimate is off by 4.00x"));
}

TEST_CASE("kvsim check does not lint a sliding window now that it is modelled", "[cli]") {
  // Mistral-7B's 4,096-token sliding window is modelled (paged blocks leaving the window are
  // freed, attention reads at most the window), so nothing warns about it. The same file's
  // prefix caching on a Mooncake trace (hashes) and kv_guard on the caching allocator (no pool)
  // are sound: 0 warnings.
  auto r = run_cli(std::string("check '") + KVSIM_TEST_DATA + "/scenarios/lints-mistral.yaml'");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, !Contains("sliding-window"));
  CHECK_THAT(r.err, !Contains("warning"));
  CHECK_THAT(r.out, Contains("0 warnings"));
}

TEST_CASE("the shipped scenarios all pass kvsim check", "[cli][scenarios]") {
  for (const auto& e : fs::directory_iterator(fs::path(KVSIM_SOURCE_DIR) / "scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    INFO("scenario " << e.path().filename());
    auto r = run_cli("check '" + e.path().string() + "'");
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("kvsim check refuses a guard whose policy's KV store lacks a capability it needs",
          "[cli][bad-input]") {
  // The watermark guard needs a paged store (core/registry.h entries carry the capabilities).
  // Fails if make_guards() stops checking them: check would then print "ok" with exit code 0.
  const fs::path f =
      fs::path(KVSIM_TEST_DATA) / "bad" / "run" / "watermark-on-caching-allocator.yaml";
  auto r = run_cli("check '" + f.string() + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Contains("watermark-on-caching-allocator.yaml:16:60: policies[1].guards[1].type: "
                      "the watermark guard needs a paged KV store; this policy's "
                      "engine.kv.type is caching_allocator"));
}

TEST_CASE("kvsim check takes --set as kvsim run does", "[cli]") {
  // serial.yaml (Llama-3-8B on an H100, 8,192-token context) passes as written. Patched to
  // Llama-3.1-8B on an L4 at its full 131,072 tokens (chunked, 2,048-token steps), one request
  // needs 16.00 GiB of KV against the 3.60 GiB the L4 leaves
  // (tests/data/bad/scenario/max-model-len-over-pool.yaml): check
  // finds that without a run, as `run --set` would. A --set to a key the scenario cannot have is
  // refused as run refuses it.
  const std::string serial = std::string(KVSIM_SOURCE_DIR) + "/tests/data/capacity/serial.yaml";
  auto ok = run_cli("check '" + serial + "' --set engine.max_num_seqs=2");
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.out, Contains("ok (scenario 'serial', model llama-3-8b, gpu h100-sxm"));
  auto patched =
      run_cli("check '" + serial +
              "' --set gpu=l4 --set model=llama-3.1-8b --set engine.max_model_len=131072"
              " --set engine.chunked_prefill=true --set engine.max_num_batched_tokens=2048");
  CHECK(patched.exit_code == 2);
  CHECK_THAT(patched.err,
             Contains("max_model_len 131072 needs 16.00 GiB of KV cache for one request"));
  auto bad = run_cli("check '" + serial + "' --set engine.max_num_seq=2");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("max_num_seq"));
}
