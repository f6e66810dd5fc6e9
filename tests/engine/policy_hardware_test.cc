// A policy's own `model:` and `gpu:` (and a cluster group's): the what-if of two models or two
// GPUs in one scenario, each policy with its own pool and latency model.
#include <catch2/catch.hpp>

#include <string>

#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::prepare_error;
using kvsim::test::run_yaml;

namespace {

// One request of 100 prompt + 1 output tokens arriving at 1 s: its TTFT is one prefill of 100
// tokens on an idle replica, the latency model's time for that batch (rounded to the clock's ns).
double prefill_100_s(const std::string& model, const std::string& gpu_name) {
  const Catalog& cat = Catalog::builtin();
  const GpuSpec& gpu = cat.gpu(gpu_name);
  const LatencyModel lm(cat.model(model), gpu, default_profile(gpu), AttentionKind::kFlash);
  BatchShape s;
  s.block_tokens = 16;
  s.prefill = {{.tokens = 100, .context_tokens = 0, .emits_token = true}};
  return sim_to_seconds(test::iteration_ns(lm, s));
}

const char* kOneShortRequest = R"(
workload:
  arrivals: {type: fixed, rate: 1}
  max_requests: 1
  prompt_tokens: 100
  output_tokens: 1
)";

}  // namespace

TEST_CASE("policies on their own GPU and model: each its own pool and latency",
          "[engine][policy]") {
  const RunResult r = run_yaml(std::string(R"(name: what-if
model: llama-3-8b
gpu: a100-sxm4-80gb
policies:
  - {name: base, guards: []}
  - {name: on-h100, guards: [], gpu: h100-sxm}
  - {name: on-a100-40, guards: [], gpu: a100-sxm4-40gb}
  - {name: llama2, guards: [], model: llama-2-7b}
)") + kOneShortRequest);
  REQUIRE(r.policies.size() == 4);
  const PolicySummary &base = r.policies[0], &h100 = r.policies[1], &a40 = r.policies[2],
                      &l2 = r.policies[3];
  // TTFT: the prefill on each policy's own hardware and model.
  CHECK(base.ttft.p50 == prefill_100_s("llama-3-8b", "a100-sxm4-80gb"));
  CHECK(h100.ttft.p50 == prefill_100_s("llama-3-8b", "h100-sxm"));
  CHECK(a40.ttft.p50 == prefill_100_s("llama-3-8b", "a100-sxm4-40gb"));
  CHECK(l2.ttft.p50 == prefill_100_s("llama-2-7b", "a100-sxm4-80gb"));
  CHECK(h100.ttft.p50 < base.ttft.p50);
  // Pools: the same model and engine on the 40 GB A100 gets 0.9 x (its capacity less the 80 GB
  // one's) less KV pool (vLLM's gpu_memory_utilization 0.9 of each GPU; weights, activations and
  // the rest are the same), to within a block of each pool's rounding.
  const Catalog& cat = Catalog::builtin();
  const double less = 0.9 * static_cast<double>(cat.gpu("a100-sxm4-80gb").memory_bytes -
                                                cat.gpu("a100-sxm4-40gb").memory_bytes);
  const int64_t block = 16 * cat.model("llama-3-8b").kv_bytes_per_token();
  CHECK(std::abs(static_cast<double>(base.kv_pool_bytes - a40.kv_pool_bytes) - less) <=
        2.0 * block);
  // Their names go to summary.json only for the policies that set them.
  CHECK(base.model.empty());
  CHECK(base.gpu.empty());
  CHECK(h100.gpu == "h100-sxm");
  CHECK(l2.model == "llama-2-7b");
}

TEST_CASE("a cluster group's own model and a policy's GPU under it", "[engine][policy][cluster]") {
  // Group a runs the policy's GPU (h100-sxm) and the scenario's model; group b its own model.
  // Round robin: request 0 goes to a-0 (llama-3-8b on H100): its TTFT is that prefill.
  const RunResult r = run_yaml(std::string(R"(name: groups
model: llama-3-8b
gpu: a100-sxm4-80gb
cluster:
  router: {type: round_robin}
  replicas: [{name: a}, {name: b, model: llama-2-7b}]
policies: [{name: p, guards: [], gpu: h100-sxm}]
)") + kOneShortRequest);
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.cluster);
  CHECK(p.cluster->replicas[0].gpu == "h100-sxm");
  CHECK(p.cluster->replicas[0].model.empty());
  CHECK(p.cluster->replicas[1].model == "llama-2-7b");
  CHECK(p.ttft.p50 == prefill_100_s("llama-3-8b", "h100-sxm"));
}

TEST_CASE("an unknown key in a policy lists the keys a policy accepts",
          "[engine][policy][errors]") {
  const std::string e = prepare_error(std::string(R"(name: bad
model: llama-3-8b
gpu: a100-sxm4-80gb
policies:
  - {name: ok}
  - {name: typo, modle: llama-2-7b}
)") + kOneShortRequest);
  CHECK_THAT(
      e, Catch::Contains("bad.yaml:6:18: policies[1]: unknown key 'modle'; did you mean 'model'?"));
  CHECK_THAT(e,
             Catch::Contains("(a policy accepts: cluster, engine, gpu, guards, model, name, slo)"));
  // A policy's model and GPU are checked where they are written.
  CHECK_THAT(prepare_error(std::string(R"(name: bad
model: llama-3-8b
gpu: a100-sxm4-80gb
policies: [{name: p, gpu: h100}]
)") + kOneShortRequest),
             Catch::Contains("bad.yaml:4:27: policies[0].gpu: unknown GPU 'h100'"));
}
