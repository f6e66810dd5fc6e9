// The engine with a sliding-window model: the paged store frees blocks that leave the window on
// the decode path (deferred growth), every invariant holds in checking mode, and the KV held
// peaks at the prefill instead of at the end of the sequence.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
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

TEST_CASE("fast-forward with a sliding window: attended tokens stop at the window, same files",
          "[engine][window][fast_forward]") {
  namespace fs = std::filesystem;
  // One request, a 40-token prompt and 100 output tokens, on Mistral-7B's shape with a 64-token
  // window, 16-token blocks. The prefill makes token 1; decode step j (1..99) plans context
  // 40 + j, whose query attends to min(40 + j, 64) tokens: 41..63, then 64 from step 24 on,
  // when the decode aggregate moves it out of the growing members (LazyDecodes::next_cap). Its
  // KV grows through long deferral windows that stop before each growth that frees blocks left
  // behind by the window (the first at target 81: floor((81 - 64) / 16) = 1 block), so those
  // growths reach the store one by one, as stepping's do.
  const fs::path base = test::fresh_dir("window-ff");
  {
    std::ofstream t(base / "trace.csv");
    t << "arrival_s,prompt_tokens,output_tokens\n0,40,100\n";
  }
  const std::string yaml = fmt::format(R"(
name: window-ff
model: {{name: windowed, layers: 32, heads: 32, kv_heads: 8, head_dim: 128, hidden: 4096, ffn: 14336, vocab: 32000, max_position: 32768, sliding_window: 64}}
gpu: a100-sxm4-80gb
engine: {{kv: {{type: paged, block_size: 16}}}}
workload:
  trace: {{path: {}}}
policies: [{{name: p, guards: []}}]
)",
                                       (base / "trace.csv").string());
  const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "t.yaml"), Catalog::builtin());
  const LatencyModel lat(s.model, s.gpu, default_profile(s.gpu), AttentionKind::kFlash);
  BatchShape prefill;
  prefill.block_tokens = 16;
  prefill.prefill = {{40, 0, true}};
  SimTime e2e = test::iteration_ns(lat, prefill);
  for (int64_t j = 1; j <= 99; ++j) {
    BatchShape d;
    d.block_tokens = 16;
    d.decode_seqs = 1;
    d.decode_context_tokens = std::min<int64_t>(40 + j, 64);
    e2e += test::iteration_ns(lat, d);
  }
  test::in_both_modes(s, base, [&](bool ff, const PolicySummary& p, const fs::path& dir) {
    CHECK(p.iterations == 100);
    // Every decode step in a stretch; some in quiet runs (not across step 24, nor the growths
    // that reach the store).
    CHECK(p.fast_forward_iterations == (ff ? 99 : 0));
    if (ff) {
      CHECK(p.quiet_iterations > 40);
      CHECK(p.quiet_iterations < 99);
    }
    const std::string requests = test::file_text(dir / "requests.csv");
    CHECK(requests.find(fmt::format(",completed,{:.6f},",
                                    sim_to_seconds(test::iteration_ns(lat, prefill)))) !=
          std::string::npos);
    CHECK(requests.find(fmt::format(",{:.6f},0,0,", sim_to_seconds(e2e))) != std::string::npos);
  });
  fs::remove_all(base);
}
