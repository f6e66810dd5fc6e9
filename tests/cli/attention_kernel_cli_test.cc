// engine.attention_kernel picks the flash generation of the built-in profile: FA3 on an H100
// prefills faster than FA2 (0.772 vs 0.349 of peak: docs/fidelity.md), FA3 on an A100 is an
// error naming the key's file:line:col.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"

using namespace kvsim::test;
using Catch::Matchers::Contains;

namespace {

// About ten requests of 4,096 prompt tokens, 1 output token, seconds apart: each TTFT is one
// prefill iteration, whose attention term is where FA2 and FA3 differ.
std::string scenario(const std::string& gpu, const std::string& kernel) {
  return "name: t\nseed: 1\nmodel: llama-3-8b\ngpu: " + gpu +
         "\nengine:\n  attention_kernel: " + kernel +
         "\nworkload:\n  arrivals: {type: poisson, rate: 0.5}\n"
         "  prompt_tokens: {type: fixed, value: 4096}\n  output_tokens: {type: fixed, value: 1}\n"
         "  duration_s: 20\npolicies:\n  - name: p\n    guards: []\n";
}

double ttft(const std::string& dir, const std::string& gpu, const std::string& kernel) {
  const std::string file = dir + "/" + kernel + ".yaml";
  std::ofstream(file) << scenario(gpu, kernel);
  auto r = run_cli("run " + file + " -o " + dir + "/" + kernel);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(dir + "/" + kernel + "/summary.json");
  const auto j = nlohmann::json::parse(in);
  return j["policies"][0]["ttft_s"]["mean"].get<double>();
}

}  // namespace

TEST_CASE("engine.attention_kernel: fa2 | fa3 on Hopper, refused elsewhere", "[cli][latency]") {
  const std::string dir = make_temp_dir("kvsim-attn-kernel");
  const double fa2 = ttft(dir, "h100-sxm", "fa2");
  const double fa3 = ttft(dir, "h100-sxm", "fa3");
  CHECK(fa3 < fa2);
  CHECK(ttft(dir, "h100-sxm", "auto") == fa3);  // vLLM's default on Hopper
  const std::string bad = dir + "/bad.yaml";
  std::ofstream(bad) << scenario("a100-sxm4-80gb", "fa3");
  auto r = run_cli("run " + bad + " -o " + dir + "/bad");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Contains("bad.yaml:6:21") && Contains("FlashAttention-3 runs on Hopper GPUs only"));
}
