// The engine with a sliding-window model: the paged store frees blocks that leave the window on
// the decode path (deferred growth), every invariant holds in checking mode, and the KV held
// peaks at the prefill instead of at the end of the sequence.
#include <catch2/catch.hpp>

#include <string>

#include <fmt/format.h>

#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::run_yaml;

namespace {
// One request, a 10,000-token prompt and 500 output tokens, on an A100-80GB with 16-token
// blocks. `model` is Mistral-7B, with or without its window.
std::string one_long_request(const std::string& model) {
  return fmt::format(R"(
name: window
seed: 1
model: {}
gpu: a100-sxm4-80gb
engine: {{kv: {{type: paged, block_size: 16}}}}
workload:
  arrivals: {{type: poisson, rate: 1}}
  max_requests: 1
  prompt_tokens: {{type: fixed, value: 10000}}
  output_tokens: {{type: fixed, value: 500}}
policies: [{{name: p}}]
)",
                     model);
}
// Mistral-7B-v0.1's shape without its window.
constexpr const char* kMistralNoWindow =
    "{name: mistral-full, layers: 32, heads: 32, kv_heads: 8, head_dim: 128, hidden: 4096, "
    "ffn: 14336, vocab: 32000, max_position: 32768}";
}  // namespace

TEST_CASE("a sliding window caps the KV an engine's sequence holds", "[engine][window]") {
  const RunResult w = run_yaml(one_long_request("mistral-7b"));
  const RunResult f = run_yaml(one_long_request(kMistralNoWindow));
  const PolicySummary& a = w.policies.at(0);
  const PolicySummary& b = f.policies.at(0);
  CHECK(kvsim::test::count(a, Outcome::kCompleted) == 1);
  CHECK(kvsim::test::count(b, Outcome::kCompleted) == 1);
  // Same model size, same pool.
  REQUIRE(a.kv_pool_bytes == b.kv_pool_bytes);
  // Block bytes: 16 x 131,072 = 2,097,152. Without the window the last decode step (context
  // 10,499) holds ceil(10,499 / 16) = 657 blocks. With it the prefill's 625 blocks are the
  // most: the first decode step frees 369 and holds 257, and decode never holds more.
  const double pool = static_cast<double>(a.kv_pool_bytes);
  CHECK(b.kv_pool_peak_occupancy * pool == Approx(657.0 * 2097152).epsilon(1e-12));
  CHECK(a.kv_pool_peak_occupancy * pool == Approx(625.0 * 2097152).epsilon(1e-12));
  // Decode attention reads at most 4,096 tokens instead of 10,001 .. 10,499: the windowed run
  // is shorter.
  CHECK(a.duration_s < b.duration_s);
}
