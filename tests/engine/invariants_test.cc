// Property tests: random scenarios run in checking mode (pool and bookkeeping invariants after
// every iteration); every request ends in exactly one outcome; same inputs, same bytes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>

#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::run_yaml;

namespace {

// Where random_scenario(seed, true) may write its trace (removed by the test that runs it).
std::filesystem::path random_trace_path(uint64_t seed) {
  return std::filesystem::temp_directory_path() / fmt::format("kvsim-pc-{}-{}.jsonl", ::getpid(), seed);
}

// `wide`: the fast-forward identity test's variety on top (more paged stores, prefix caching
// over a trace with shared prefixes, vllm_v0 and the scheduling policies, bursts, longer
// outputs, max_num_seqs caps, a queue deadline, native attention, tensor or pipeline
// parallelism).
std::string random_scenario(uint64_t seed, bool wide = false) {
  std::mt19937_64 g(seed);
  auto pick = [&](std::initializer_list<const char*> xs) {
    return *(xs.begin() + static_cast<long>(g() % xs.size()));
  };
  const char* kv = pick({"{type: paged, block_size: 16}", "{type: paged, block_size: 32}",
                         "{type: contiguous, reserve: prompt_plus_max_new}",
                         "{type: contiguous, reserve: max_len, max_len: 16384}",
                         "{type: caching_allocator, growth: preallocate}",
                         "{type: caching_allocator, growth: chunked, chunk_tokens: 512}"});
  const char* guards = pick({"[]", "[{type: kv_guard, safety_margin_gb: 4}]",
                             "[{type: kv_guard, safety_margin_gb: 4, on_fail: truncate, max_safe_len: 4096}]",
                             "[{type: reserve, timeout_s: 5}]", "[{type: max_inflight, max_inflight: 4}]",
                             "[{type: max_model_len, max_model_len: 12000, on_fail: truncate}, {type: reserve}]"});
  const double rate = 0.5 + static_cast<double>(g() % 200) / 10.0;
  const char* scheduler = pick({"continuous", "continuous", "static"});
  if (wide && g() % 4 == 0) scheduler = "vllm_v0";
  const char* chunked = pick({"true", "false"});
  // Unchunked, the batch must hold a whole request (max_model_len): 4,096 only with chunking,
  // which the static scheduler never does.
  const char* batched = pick({"16384", "4096"});
  const bool chunks = chunked == std::string("true") && scheduler == std::string("continuous");
  std::string extra_engine, extra_workload;
  int gpu_gb = 24;
  const char* outputs = "{type: uniform, min: 1, max: 300}";
  std::string trace_path;  // a trace instead of the generated workload
  std::string model = "llama-3-8b";
  if (wide) {
    // A quarter with sliding-window attention (Mistral-7B-v0.1's shape, a window that contexts
    // reach while decoding): drawn apart, so that the other choices stay as they were.
    std::mt19937_64 windowed(seed ^ 0x5eedULL);
    if (windowed() % 4 == 0) {
      model = fmt::format(
          "{{name: windowed, layers: 32, heads: 32, kv_heads: 8, head_dim: 128, hidden: 4096, "
          "ffn: 14336, vocab: 32000, max_position: 32768, sliding_window: {}}}",
          std::initializer_list<int>{200, 700, 3000}.begin()[windowed() % 3]);
    }
    if (g() % 2 == 0) kv = pick({"{type: paged, block_size: 16}", "{type: paged, block_size: 8}"});
    if (g() % 4 == 0) {
      // Prefix caching over a Mooncake-format trace whose prompts share prefix blocks (5
      // conversations, each request a few of its blocks and one or two of its own), so cached
      // blocks are hit, shared and evicted while decodes cross into new ones.
      kv = "{type: paged, block_size: 16, enable_prefix_caching: true}";
      const std::string path = random_trace_path(seed).string();
      std::ofstream trace(path);
      int64_t ms = 0;
      for (int i = 0; i < 40; ++i) {
        const uint64_t conversation = g() % 5;
        const uint64_t shared = 1 + g() % 6, own = 1 + g() % 2;
        std::string ids;
        for (uint64_t b = 0; b < shared + own; ++b) {
          ids += fmt::format("{}{}", b ? ", " : "", b < shared ? conversation * 100 + b : 1000 + i * 10 + b);
        }
        const uint64_t prompt = (shared + own - 1) * 512 + 1 + g() % 511;
        trace << fmt::format(R"({{"timestamp": {}, "input_length": {}, "output_length": {}, "hash_ids": [{}]}})",
                             ms, prompt, 1 + g() % 400, ids)
              << "\n";
        ms += static_cast<int64_t>(g() % 1500);
      }
      trace_path = path;
    }
    extra_engine = fmt::format("  scheduling_policy: {}\n  max_num_seqs: {}\n",
                               pick({"fcfs", "priority", "shortest_prompt_first"}),
                               pick({"256", "256", "8", "3"}));
    if (g() % 3 == 0) extra_engine += "  max_queue_time_s: 4\n";
    // Native attention (its activations grow with the context: its score matrices need a
    // larger GPU), tensor and pipeline parallelism (another latency line and pool per GPU).
    if (g() % 3 == 0) {
      extra_engine += "  attention: native\n";
      gpu_gb = 48;
    }
    extra_engine += pick({"", "", "  tensor_parallel: 2\n", "  pipeline_parallel: 2\n"});
    if (g() % 2 == 0) {
      extra_workload = fmt::format(
          "  bursts: [{{at_s: {}, count: {}, prompt_tokens: {{type: uniform, min: 16, max: 6000}}, "
          "output_tokens: 200}}]\n",
          g() % 4, 1 + g() % 12);
    }
    outputs = pick({"{type: uniform, min: 1, max: 300}", "{type: uniform, min: 100, max: 900}"});
  }
  const std::string workload =
      trace_path.empty()
          ? fmt::format(
                "  arrivals: {{type: poisson, rate: {}}}\n"
                "  max_requests: 40\n"
                "  prompt_tokens: {{type: mixture, components: [{{weight: 0.8, type: uniform, min: 16, "
                "max: 2048}}, {{weight: 0.2, type: uniform, min: 4096, max: 14000}}]}}\n"
                "  output_tokens: {}\n{}",
                rate, outputs, extra_workload)
          : fmt::format("  trace: {{path: {}}}\n", trace_path);
  return fmt::format(R"(
name: random-{}
seed: {}
model: {}
gpu: {{name: g, memory_gb: {}, hbm_gb_per_s: 1000, fp16_tflops: 200}}
engine:
  scheduler: {}
  chunked_prefill: {}
  max_num_batched_tokens: {}
  max_model_len: 14300  # prompts up to 14,000 + 300 output tokens, past the model's 8,192
  allow_long_max_model_len: true
  preemption: {}
  on_oom: {}
  restart_s: 3
  kv: {}
{}workload:
{}policies: [{{name: p, guards: {}}}]
)",
                     seed, seed, model, gpu_gb, scheduler, chunked, chunks ? batched : "16384",
                     pick({"recompute", "swap", "off"}), pick({"crash", "abort_request"}), kv,
                     extra_engine, workload, guards);
}

}  // namespace

TEST_CASE("random scenarios keep every invariant and account for every request", "[property][engine]") {
  const uint64_t seed = GENERATE(range(0, 40));
  const std::string yaml = random_scenario(seed);
  INFO("seed " << seed << "\n" << yaml);
  const RunResult r = run_yaml(yaml, /*check=*/true);
  const PolicySummary& p = r.policies.at(0);
  int64_t total = 0;
  for (int64_t n : p.outcomes) total += n;
  CHECK(total == p.requests_total);
  CHECK(p.requests_total >= 40);
}

// Every output file, byte for byte, in both engine modes (engine.fast_forward, docs/architecture.md
// "Fast-forward"): the closed-form decode stretches must be invisible in the results. Unchecked
// runs (checking mode steps every iteration), with a short sampling period so that samples fall
// inside would-be stretches. Small scenarios: 200 of them run in a few seconds.
TEST_CASE("fast-forward and stepping write identical result files", "[property][engine][fast_forward]") {
  namespace fs = std::filesystem;
  const uint64_t seed = GENERATE(range(0, 200));
  const std::string yaml = random_scenario(1000 + seed, /*wide=*/true);
  INFO("seed " << 1000 + seed << "\n" << yaml);
  const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
  const fs::path base = fs::temp_directory_path() / fmt::format("kvsim-ff-{}-{}", ::getpid(), seed);
  auto files = [](const fs::path& dir) {
    std::string all;
    for (const char* f : {"summary.json", "summary.csv", "requests.csv", "timeseries.csv", "manifest.json"}) {
      std::ifstream in(dir / f, std::ios::binary);
      std::ostringstream b;
      b << in.rdbuf();
      all += std::string(f) + "\n" + b.str();
    }
    return all;
  };
  RunOptions o;
  o.sample_interval_s = 0.37;
  o.out_dir = (base / "ff").string();
  const RunResult ff = run_scenario(s, o);
  o.out_dir = (base / "step").string();
  o.fast_forward = false;
  const RunResult step = run_scenario(s, o);
  CHECK(ff.policies.at(0).iterations == step.policies.at(0).iterations);
  CHECK(step.policies.at(0).fast_forward_iterations == 0);
  const std::string a = files(base / "ff"), b = files(base / "step");
  CHECK(a.size() > 500);
  CHECK(a == b);
  fs::remove_all(base);
  fs::remove(random_trace_path(1000 + seed));
}

// The identity above means something only if the stretches happen on those scenarios: a fixed
// sample of them (the first 20 seeds, whichever seeds the test above runs), fast-forward only,
// must run many iterations in closed form, and many in quiet runs (recorded at once). Measured
// on this sample: 13,356 closed-form and 11,512 quiet iterations; the bounds (1,000 each, as the
// 200-seed total used to be held to) are well below, so a scheduler change that moves a few
// does not fail it, while stretches that never happen do.
TEST_CASE("fast-forward stretches and quiet runs happen on the random scenarios",
          "[property][engine][fast_forward]") {
  int64_t fast_forwarded = 0, quiet = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::string yaml = random_scenario(1000 + seed, /*wide=*/true);
    const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
    RunOptions o;
    o.sample_interval_s = 0.37;
    const RunResult ff = run_scenario(s, o);
    fast_forwarded += ff.policies.at(0).fast_forward_iterations;
    quiet += ff.policies.at(0).quiet_iterations;
    std::filesystem::remove(random_trace_path(1000 + seed));
  }
  INFO("closed form " << fast_forwarded << ", quiet " << quiet);
  CHECK(fast_forwarded > 1000);
  CHECK(quiet > 1000);
}

TEST_CASE("a run is a pure function of its scenario and seed: identical bytes", "[engine][determinism]") {
  namespace fs = std::filesystem;
  const Scenario s = load_scenario_file(fs::path(KVSIM_SOURCE_DIR) / "scenarios" / "seed-a-guard.yaml",
                                        Catalog::builtin());
  auto read_all = [](const fs::path& dir) {
    std::string all;
    for (const char* f : {"summary.json", "summary.csv", "requests.csv", "timeseries.csv", "manifest.json"}) {
      std::ifstream in(dir / f, std::ios::binary);
      std::ostringstream b;
      b << in.rdbuf();
      all += std::string(f) + "\n" + b.str();
    }
    return all;
  };
  const fs::path base = fs::temp_directory_path() / fmt::format("kvsim-det-{}", ::getpid());
  RunOptions o;
  o.out_dir = (base / "a").string();
  run_scenario(s, o);
  o.out_dir = (base / "b").string();
  run_scenario(s, o);
  const std::string a = read_all(base / "a"), b = read_all(base / "b");
  CHECK(a.size() > 1000);
  CHECK(a == b);
  fs::remove_all(base);
}

// The same random scenarios on a random cluster (1 to 4 replicas of two groups, any router), in
// checking mode: every replica's outcomes add up to its requests, and the replicas' outcomes add
// up to the totals, but for the requests routed to nothing (failed_unavailable while every
// replica was down), which no replica saw.
TEST_CASE("random clusters conserve requests across replicas", "[property][engine][cluster]") {
  const uint64_t seed = GENERATE(range(0, 20));
  std::mt19937_64 g(seed ^ 0x5eed);
  const char* routers[] = {"round_robin", "random", "least_outstanding", "least_kv",
                           "session_affinity", "prefix_affinity"};
  const std::string yaml =
      random_scenario(seed) +
      fmt::format("cluster:\n  replicas: [{{name: x, count: {}}}, {{name: y, count: {}}}]\n"
                  "  router: {{type: {}}}\n",
                  1 + g() % 2, 1 + g() % 2, routers[g() % 6]);
  INFO("seed " << seed << "\n" << yaml);
  const RunResult r = run_yaml(yaml, /*check=*/true);
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.cluster);
  std::array<int64_t, 7> sum{};
  int64_t requests = 0, ooms = 0;
  for (const ReplicaSummary& x : p.cluster->replicas) {
    int64_t own = 0;
    for (size_t o = 0; o < sum.size(); ++o) {
      sum[o] += x.outcomes[o];
      own += x.outcomes[o];
    }
    CHECK(own == x.requests_total);
    requests += x.requests_total;
    ooms += x.oom_events;
  }
  const size_t unavailable = outcome_index(Outcome::kFailedUnavailable);
  const int64_t unrouted = p.outcomes[unavailable] - sum[unavailable];
  CHECK(unrouted >= 0);
  CHECK(requests + unrouted == p.requests_total);
  for (size_t o = 0; o < sum.size(); ++o) {
    if (o != unavailable) CHECK(sum[o] == p.outcomes[o]);
  }
  CHECK(ooms == p.oom_events);
  CHECK(p.requests_total >= 40);
}
