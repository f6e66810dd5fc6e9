// kvsim_bench_cluster: what a cluster costs per request. Runs --requests requests on a cluster of
// --replicas identical replicas (Llama-3-8B on A100-80GB, paged store, continuous batching with
// chunked prefill, no guard) behind --router, with Poisson arrivals at --rate-per-replica times
// the replica count, so every replica carries the same load whatever the cluster's size: the
// cost per request of 64 replicas x N requests against 1 replica x N/64 isolates what the
// cluster adds (routing over every replica at each arrival, a larger event queue, one recorder
// per replica). Writes the normal result folder (requests.csv included) to a temporary folder and
// prints one JSON line:
//   {"replicas":…, "requests":…, "wall_s":…, "us_per_request":…, "peak_rss_bytes":…, …}
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/bench_flags.h"
#include "bench/process_usage.h"
#include "models/catalog.h"
#include "sim/config/scenario.h"
#include "sim/request/outcome.h"
#include "sim/run/scenario_runner.h"

int main(int argc, char** argv) {
  long long requests = 1'000'000;
  int replicas = 64;
  double rate_per_replica = 2.0;
  std::string router = "least_outstanding";
  using kvsim::bench::read_flag;
  for (int i = 1; i < argc; ++i) {
    const bool known = read_flag(argc, argv, i, "--requests", requests) ||
                       read_flag(argc, argv, i, "--replicas", replicas) ||
                       read_flag(argc, argv, i, "--rate-per-replica", rate_per_replica) ||
                       read_flag(argc, argv, i, "--router", router);
    if (!known) {
      fmt::print(stderr,
                 "usage: kvsim_bench_cluster [--requests N] [--replicas R] "
                 "[--rate-per-replica X] [--router TYPE]\n");
      return 2;
    }
  }
  if (requests <= 0 || replicas <= 0 || rate_per_replica <= 0) {
    fmt::print(
        stderr,
        "kvsim_bench_cluster: --requests, --replicas and --rate-per-replica must be positive\n");
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("kvsim-bench-cluster-{}", ::getpid());
  // Chat-like lengths (prompts up to 2,048, answers up to 512 tokens); 2 requests/s per replica
  // keeps an A100 busy with a full batch of decodes.
  const std::string yaml = fmt::format(R"(name: bench-cluster
seed: 1
model: llama-3-8b
gpu: a100-sxm4-80gb
engine:
  scheduler: continuous
  max_num_seqs: 256
  max_num_batched_tokens: 8192
  chunked_prefill: true
  kv: {{type: paged, block_size: 16}}
cluster:
  replicas: [{{name: a100, count: {}}}]
  router: {{type: {}}}
workload:
  arrivals: {{type: poisson, rate: {}}}
  max_requests: {}
  prompt_tokens: {{type: uniform, min: 32, max: 2048}}
  output_tokens: {{type: uniform, min: 16, max: 512}}
policies:
  - name: cluster
    guards: []
)",
                                       replicas, router, rate_per_replica * replicas, requests);
  try {
    const kvsim::Scenario s = kvsim::load_scenario(
        kvsim::ConfigNode::parse_string(yaml, "bench-cluster.yaml"), kvsim::Catalog::builtin());
    kvsim::RunOptions o;
    o.out_dir = (dir / "out").string();
    o.sample_interval_s = 10.0;
    const auto t0 = std::chrono::steady_clock::now();
    const kvsim::RunResult r = kvsim::run_scenario(s, o);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto& p = r.policies.front();
    nlohmann::ordered_json j;
    j["replicas"] = replicas;
    j["router"] = router;
    j["requests"] = p.requests_total;
    j["wall_s"] = wall;
    j["us_per_request"] = 1e6 * wall / static_cast<double>(p.requests_total);
    j["requests_per_s"] = static_cast<double>(p.requests_total) / wall;
    j["iterations"] = p.iterations;
    j["us_per_iteration"] = 1e6 * wall / static_cast<double>(std::max<int64_t>(1, p.iterations));
    j["peak_rss_bytes"] = kvsim::bench::peak_rss_bytes();
    j["sim_duration_s"] = p.duration_s;
    j["completed"] = p.outcomes[kvsim::outcome_index(kvsim::Outcome::kCompleted)];
    fmt::print("{}\n", j.dump());
  } catch (const std::exception& e) {
    fmt::print(stderr, "kvsim_bench_cluster: {}\n", e.what());
    fs::remove_all(dir);
    return 1;
  }
  fs::remove_all(dir);
  return 0;
}
