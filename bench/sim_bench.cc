// kvsim_bench_sim: end-to-end simulator throughput. Builds a synthetic trace of --requests
// requests (default one million) whose prompt and output lengths are drawn from the shipped
// traces' empirical distributions (scenarios/traces: Azure conversation 2023 and Mooncake
// conversation), arriving as a Poisson stream at a rate above what the replica serves, so batches
// stay full. Replays it with one policy (paged store, continuous batching, no guard) through
// run_scenario, writing the normal result folder, and prints one JSON line:
//   {"requests":…, "wall_s":…, "requests_per_s":…, "iterations_per_s":…, "peak_rss_bytes":…}
// (requests: those that arrived; with --max-wall-s S the replay stops after S wall seconds and
// the line gets "partial": "max_wall_s" and in_flight_at_stop). A terminal stderr gets a progress
// line every second.
// wall_s covers the replay and its result files, not building the trace.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "bench/bench_flags.h"
#include "bench/process_usage.h"
#include "core/data_path.h"
#include "models/catalog.h"
#include "sim/config/scenario.h"
#include "sim/request/outcome.h"
#include "sim/run/scenario_runner.h"

namespace {

namespace fs = std::filesystem;

struct Lengths {
  std::vector<std::pair<int64_t, int64_t>> pairs;  // (prompt, output), kept together
};

void read_azure(const fs::path& p, Lengths& out) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    double t = 0;
    long long prompt = 0, output = 0;
    if (std::sscanf(line.c_str(), "%lf,%lld,%lld", &t, &prompt, &output) == 3)
      out.pairs.emplace_back(prompt, output);
  }
}

void read_mooncake(const fs::path& p, Lengths& out) {
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    out.pairs.emplace_back(j["input_length"].get<int64_t>(), j["output_length"].get<int64_t>());
  }
}

// The run's scratch folder (the synthetic trace, and the results unless --out keeps them).
fs::path scratch_dir() {
  return fs::temp_directory_path() / fmt::format("kvsim-bench-sim-{}", ::getpid());
}

struct BenchFlags {
  int64_t requests = 1'000'000;
  double rate = 2.0;  // req/s; the replica serves ~1.7/s of this mix (see bench/README.md)
  bool fast_forward = true;
  double output_mean = 0;  // --output-mean: outputs drawn geometric with this mean instead
  double max_wall_s = 0;   // --max-wall-s: stop the replay cleanly (partial results)
  std::string keep;        // --out: the result folder to keep (default: a temporary one, removed)
  // --model, --gpu: another catalog model and GPU for the same trace and engine (a hybrid model's
  // cost against the dense one's, bench/README.md).
  std::string model = "llama-3-8b";
  std::string gpu = "a100-sxm4-80gb";
  // --eagle3: speculative decoding, EAGLE-3 with k = 3 and scenarios/speculative-decoding-
  // llama-3-8b.yaml's acceptance (0.75, 0.5, 0.3 by position), for its cost against none.
  bool eagle3 = false;
};

// Reads the flags into `f`; false, with the usage printed, on one it does not know.
bool read_bench_flags(int argc, char** argv, BenchFlags& f) {
  using kvsim::bench::read_flag;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--no-fast-forward") {
      f.fast_forward = false;
      continue;
    }
    if (std::string_view(argv[i]) == "--eagle3") {
      f.eagle3 = true;
      continue;
    }
    const bool known = read_flag(argc, argv, i, "--requests", f.requests) ||
                       read_flag(argc, argv, i, "--rate", f.rate) ||
                       read_flag(argc, argv, i, "--output-mean", f.output_mean) ||
                       read_flag(argc, argv, i, "--max-wall-s", f.max_wall_s) ||
                       read_flag(argc, argv, i, "--out", f.keep) ||
                       read_flag(argc, argv, i, "--model", f.model) ||
                       read_flag(argc, argv, i, "--gpu", f.gpu);
    if (!known) {
      fmt::print(
          stderr,
          "usage: kvsim_bench_sim [--requests N] [--rate R] [--output-mean L] [--no-fast-forward] "
          "[--max-wall-s S] [--out DIR] [--model NAME] [--gpu NAME] [--eagle3]\n");
      return false;
    }
  }
  return true;
}

// The bench's scenario: the synthetic trace through one continuous-batching replica.
std::string bench_scenario_yaml(const BenchFlags& f) {
  return fmt::format(R"(name: bench-sim
seed: 1
model: {}
gpu: {}
engine:
  scheduler: continuous
  max_num_seqs: 256
  max_num_batched_tokens: 8192
  # The shipped traces' prompts reach 32,768 tokens, past Llama-3-8B's 8,192 positions: served
  # as a RoPE-extended deployment would (vLLM needs VLLM_ALLOW_LONG_MAX_MODEL_LEN for it), with
  # chunked prefill so the 8,192-token budget holds (vLLM V1's default), not refused.
  max_model_len: 34816
  allow_long_max_model_len: true
  chunked_prefill: true
  attention: flash
  kv: {{type: paged, block_size: 16}}{}
workload:
  trace: {{path: trace.csv, max_prompt_tokens: 32768}}
policies:
  - name: paged
    guards: []
)",
                     f.model, f.gpu,
                     f.eagle3 ? "\n  speculative_config: {method: eagle3, "
                                "num_speculative_tokens: 3, "
                                "acceptance_per_position: [0.75, 0.5, 0.3]}"
                              : "");
}

int bench_main(int argc, char** argv) {
  BenchFlags flags;
  if (!read_bench_flags(argc, argv, flags)) return 2;
  const auto& [requests, rate, fast_forward, output_mean, max_wall_s, keep] =
      std::tie(flags.requests, flags.rate, flags.fast_forward, flags.output_mean, flags.max_wall_s,
               flags.keep);
  if (requests < 1 || rate <= 0 || output_mean < 0) {
    fmt::print(stderr, "kvsim_bench_sim: --requests and --rate must be positive\n");
    return 2;
  }
  const fs::path traces = kvsim::data_dir() / "scenarios" / "traces";
  Lengths lengths;
  read_azure(traces / "azure-conv-2023.csv", lengths);
  read_mooncake(traces / "mooncake-conversation.orig.jsonl", lengths);

  const fs::path dir = scratch_dir();
  fs::create_directories(dir);
  {
    std::mt19937_64 rng(2024);
    std::exponential_distribution<double> gap(rate);
    std::uniform_int_distribution<size_t> pick(0, lengths.pairs.size() - 1);
    // --output-mean: the trace's prompts, outputs geometric on 1, 2, ... with that mean (the
    // cost-per-request sweep of bench/output_length_sweep.sh), capped at 4x the mean.
    std::geometric_distribution<int64_t> out_len(output_mean > 1 ? 1.0 / output_mean : 0.5);
    std::ofstream trace(dir / "trace.csv");
    trace << "arrival_s,prompt_tokens,output_tokens\n";
    double t = 0;
    for (int64_t i = 0; i < requests; ++i) {
      auto [prompt, output] = lengths.pairs[pick(rng)];
      if (output_mean > 0) {
        output = std::min<int64_t>(1 + out_len(rng), static_cast<int64_t>(4 * output_mean));
      }
      trace << fmt::format("{:.6f},{},{}\n", t, prompt, std::max<int64_t>(1, output));
      t += gap(rng);
    }
  }
  const std::string yaml = bench_scenario_yaml(flags);
  const kvsim::Scenario s =
      kvsim::load_scenario(kvsim::ConfigNode::parse_string(yaml, (dir / "bench.yaml").string()),
                           kvsim::Catalog::builtin());
  kvsim::RunOptions o;
  o.out_dir = keep.empty() ? (dir / "out").string() : keep;
  o.fast_forward = fast_forward;
  o.sample_interval_s = 10.0;
  o.max_wall_s = max_wall_s;
  // A trace of N requests at R req/s spans ~N/R s: 10^7 at 2/s passes the 30-day default, and
  // 10^8 would pass the default event limit too. A bench trace is finite: no runaway to catch.
  o.max_sim_time_s = 1e12;
  o.max_events = std::numeric_limits<uint64_t>::max();
  o.progress = isatty(fileno(stderr)) != 0;
  o.progress_total = requests;
  const kvsim::bench::CpuSplit cpu0 = kvsim::bench::cpu_split();
  const auto t0 = std::chrono::steady_clock::now();
  const kvsim::RunResult r = kvsim::run_scenario(s, o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const kvsim::bench::CpuSplit cpu1 = kvsim::bench::cpu_split();
  const auto& p = r.policies.front();
  nlohmann::ordered_json j;
  j["requests"] = p.requests_total;
  j["wall_s"] = wall;
  j["cpu_s"] = (cpu1.user_s + cpu1.sys_s) - (cpu0.user_s + cpu0.sys_s);
  j["user_s"] = cpu1.user_s - cpu0.user_s;
  j["sys_s"] = cpu1.sys_s - cpu0.sys_s;
  j["minor_faults"] = cpu1.minor_faults - cpu0.minor_faults;
  j["requests_per_s"] = static_cast<double>(p.requests_total) / wall;
  j["iterations_per_s"] = static_cast<double>(p.iterations) / wall;
  j["peak_rss_bytes"] = kvsim::bench::peak_rss_bytes();
  j["iterations"] = p.iterations;
  j["fast_forward_iterations"] = p.fast_forward_iterations;
  j["quiet_iterations"] = p.quiet_iterations;
  j["sim_duration_s"] = p.duration_s;
  j["completed"] = p.outcomes[kvsim::outcome_index(kvsim::Outcome::kCompleted)];
  j["fast_forward"] = fast_forward;
  j["latency_percentiles"] = p.latency_sketched ? "sketch" : "exact";
  if (p.in_flight_at_stop) {  // --max-wall-s cut the replay short
    j["partial"] = "max_wall_s";
    j["in_flight_at_stop"] = *p.in_flight_at_stop;
  }
  fmt::print("{}\n", j.dump());
  fs::remove_all(dir);
  return 0;
}

}  // namespace

// A missing data folder or an unreadable trace is one line on stderr and exit 1, as from kvsim.
int main(int argc, char** argv) {
  try {
    return bench_main(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "kvsim_bench_sim: {}\n", e.what());
    fs::remove_all(scratch_dir());
    return 1;
  }
}
