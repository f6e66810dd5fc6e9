// End-to-end: `--model` and a scenario's `model:` take a Hugging Face config.json.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"

using Catch::Matchers::Contains;
using kvsim::test::run_cli;

TEST_CASE("kvsim kv --model takes a config.json", "[cli][hf]") {
  // Pythia-6.9B: 2 x 32 layers x 32 heads x 128 x 2 bytes = 524,288 bytes per token; 2,048
  // tokens: 1,073,741,824 bytes.
  auto r = run_cli(std::string("kv --model '") + KVSIM_TEST_DATA +
                   "/hf-configs/pythia-6.9b.json' --seq 2048 --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j[0]["kv_bytes_per_request"] == 1073741824LL);
}

TEST_CASE("kvsim kv --model with a bad config.json fails with one line naming the place",
          "[cli][hf][bad-input]") {
  auto r = run_cli(std::string("kv --model '") + KVSIM_TEST_DATA +
                   "/hf-configs/malformed.json' --seq 2048");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("malformed.json:5:21: malformed JSON"));
}

TEST_CASE("a scenario's model: may be a config.json relative to the scenario", "[cli][hf]") {
  auto r = run_cli(std::string("check '") + KVSIM_TEST_DATA + "/scenarios/hf-config-model.yaml'");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("model ../hf-configs/mistral-7b-v0.1.json"));
  CHECK_THAT(r.out, Contains("0 warnings"));
  auto run = run_cli(std::string("run --no-output '") + KVSIM_TEST_DATA +
                     "/scenarios/hf-config-model.yaml'");
  CHECK(run.exit_code == 0);
}

TEST_CASE("a scenario whose config.json names an unsupported architecture fails at model:",
          "[cli][hf][bad-input]") {
  // The scenario's model: is on line 3, column 8; the architecture on line 2, column 3 of the
  // config.json.
  auto r = run_cli(std::string("check '") + KVSIM_TEST_DATA + "/scenarios/hf-config-bad.yaml'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("hf-config-bad.yaml:3:8: model: "));
  CHECK_THAT(r.err, Contains("bad-architecture.json:2:3: architecture 'MambaForCausalLM' is not "
                             "one kvsim can model"));
}

TEST_CASE("every bad config.json fails kvsim kv and kvsim latency with one line, exit 2",
          "[cli][hf][bad-input]") {
  // A 100,000-deep list crashed both (exit 139); a number that overflows a double exited 4 with
  // nlohmann's text and no file.
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(KVSIM_TEST_DATA) / "bad" / "hf-config";
  int checked = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    INFO(e.path().filename());
    const std::string expected =
        kvsim::test::trim(kvsim::test::read_text(e.path().string() + ".expected"));
    for (const char* cmd : {"kv --seq 2048 --model '", "latency --gpu a100-sxm4-80gb --model '"}) {
      auto r = run_cli(std::string(cmd) + e.path().string() + "'");
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.err, Contains(expected));
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
    ++checked;
  }
  CHECK(checked >= 7);
}
