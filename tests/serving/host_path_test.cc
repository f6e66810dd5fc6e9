// engine.vllm_version: when a token becomes visible under V1 and under vLLM 0.6's V0 engine
// (sim/serving/host_path.h, sim/serving/replica_v0_output.cc), vLLM 0.6's /metrics TPOT
// (tpot_metrics_s), and the key's errors. Every expected figure is worked out by hand below.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "sim/serving/host_path.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
namespace fs = std::filesystem;

namespace {

// Two requests of 16-token prompts: r0 at 0 s wants 3 output tokens, r1 at 5 ms wants 2. The
// vllm_v0 scheduler (a step is all prefill or all decode) and a declared step time of exactly
// 10 ms make every step 10 ms; llama-3-8b on the H100's shipped profile, whose per-step host
// overhead (overheads.iteration_us) is 1,000 us.
std::string two_requests(const fs::path& trace, const std::string& version) {
  return fmt::format(R"(
name: host-path
model: llama-3-8b
gpu: h100-sxm
engine:
  scheduler: vllm_v0
  vllm_version: "{}"
  step_time: {{fixed_s: 0.010}}
  kv: {{type: paged, block_size: 16}}
workload: {{trace: {{path: {}}}}}
policies: [{{name: p, guards: []}}]
)",
                     version, trace.string());
}

fs::path two_request_trace(const std::string& name) {
  const fs::path dir = test::fresh_dir(name);
  const fs::path trace = dir / "two.csv";
  std::ofstream(trace) << "arrival_s,prompt_tokens,output_tokens\n0,16,3\n0.005,16,2\n";
  return trace;
}

}  // namespace

TEST_CASE("V1 counts a token when its step ends", "[engine][host_path]") {
  // Steps: A [0, 10] ms prefills r0 (its token 1); B [10, 20] prefills r1, which arrived at 5
  // (its token 1; r0's decode waits: vllm_v0); C [20, 30] decodes both (r0's token 2, r1's
  // token 2: r1 is done at 30); D [30, 40] decodes r0 (token 3: done at 40).
  // TTFT: r0 10, r1 20 - 5 = 15 -> mean 12.5 ms. E2E: r0 40, r1 30 - 5 = 25 -> mean 32.5 ms.
  // /metrics TPOT: gaps (40 - 10) + (30 - 20) = 40 ms over 3 + 2 = 5 tokens = 8 ms.
  const RunResult r = test::run_yaml(two_requests(two_request_trace("v1-visibility"), "0.19.0"));
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(test::count(p, Outcome::kCompleted) == 2);
  CHECK(p.ttft.mean == Approx(0.0125).epsilon(1e-9));
  CHECK(p.e2e.mean == Approx(0.0325).epsilon(1e-9));
  REQUIRE(p.tpot_metrics_s);
  CHECK(*p.tpot_metrics_s == Approx(0.008).epsilon(1e-9));
  // Per-request TPOT, (E2E - TTFT) / (tokens - 1): r0 30 / 2 = 15, r1 10 / 1 = 10: mean 12.5.
  CHECK(p.tpot.mean == Approx(0.0125).epsilon(1e-9));
}

TEST_CASE("vLLM 0.6 stamps a step's tokens when the next step has processed them",
          "[engine][host_path]") {
  // The same steps, each stamped when the next step's output processing has run: that step's
  // start + 1 ms of host work + 0.2 + (n - 1) x 3.2 / 31 ms for the n sequences of the step
  // whose outputs it processes (0.2 ms for 1, 0.3032258 ms for 2); with nothing scheduled
  // next, at the step's end + the processing.
  //   A [0, 10]: r0's token 1, stamped at B's start 10 + 1 + 0.2 = 11.2 ms.
  //   B [10, 20]: r1's token 1, stamped at 20 + 1 + 0.2 = 21.2 ms.
  //   C [20, 30]: r1's last token; r1 still holds its blocks during D and ends at
  //     30 + 1 + 0.3032258 = 31.3032258 ms (2 sequences in C).
  //   D [30, 40]: r0's last token; nothing is scheduled after D: r0 ends at 40 + 0.2 = 40.2 ms.
  // TTFT: r0 11.2, r1 21.2 - 5 = 16.2 -> mean 13.7 ms. E2E: r0 40.2, r1 31.3032258 - 5 =
  // 26.3032258 -> mean 33.2516129 ms. /metrics TPOT: (40.2 - 11.2) + (31.3032258 - 21.2) =
  // 39.1032258 ms over 5 tokens = 7.8206452 ms. (3.2 / 31 = 0.1032258...)
  const RunResult r = test::run_yaml(two_requests(two_request_trace("v0-visibility"), "0.6.0"));
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(test::count(p, Outcome::kCompleted) == 2);
  CHECK(p.ttft.mean == Approx(0.0137).epsilon(1e-9));
  // (The clock counts whole ns: 1.3032258 ms of host work and processing is 1,303,226 ns, so
  // the last two figures agree to a few parts in 1e9, not to the double's digits.)
  CHECK(p.e2e.mean == Approx((0.0402 + 0.0262 + 3.2e-3 / 31) / 2).epsilon(1e-7));
  REQUIRE(p.tpot_metrics_s);
  CHECK(*p.tpot_metrics_s == Approx((0.029 + 0.0100 + 3.2e-3 / 31) / 5).epsilon(1e-7));
  // The steps themselves are V1's: 4 of 10 ms (the host work and processing, at most 1.31 ms, hide
  // under the 10 ms forward).
  CHECK(p.batch.iterations == 4);
  CHECK(p.batch.busy_s == Approx(0.040).epsilon(1e-9));
}

TEST_CASE("output processing of a batch: the line through RFC 6913's two points",
          "[engine][host_path]") {
  CHECK(v0_output_processing_s(0) == 0.0);
  CHECK(v0_output_processing_s(1) == Approx(0.2e-3).epsilon(1e-12));
  CHECK(v0_output_processing_s(32) == Approx(3.4e-3).epsilon(1e-12));
  // 256 sequences: 0.2 + 255 x 3.2 / 31 = 26.5226 ms.
  CHECK(v0_output_processing_s(256) == Approx(0.2e-3 + 255 * 3.2e-3 / 31).epsilon(1e-12));
}

TEST_CASE("vllm_version selects the host path by vLLM's default engine", "[engine][host_path]") {
  CHECK(host_path_of(std::nullopt) == HostPath::kV1FrontEnd);
  CHECK(host_path_of(VllmVersion{0, 6, 0, "0.6.0"}) == HostPath::kV0AsyncOutput);
  CHECK(host_path_of(VllmVersion{0, 7, 3, "0.7.3"}) == HostPath::kV0AsyncOutput);
  CHECK(host_path_of(VllmVersion{0, 8, 0, "0.8.0"}) == HostPath::kV1FrontEnd);
  CHECK(host_path_of(VllmVersion{0, 19, 0, "0.19.0"}) == HostPath::kV1FrontEnd);
  CHECK(host_path_of(VllmVersion{1, 0, 0, "1.0.0"}) == HostPath::kV1FrontEnd);
}

TEST_CASE("vllm_version's errors name file:line:col", "[engine][host_path][config]") {
  const auto error = [](const std::string& engine) {
    return test::prepare_error(fmt::format(R"(name: bad
model: llama-3-8b
gpu: h100-sxm
engine:
{}
workload: {{arrivals: {{type: poisson, rate: 1}}, prompt_tokens: 16, output_tokens: 4, max_requests: 2}}
policies: [{{name: p, guards: []}}]
)",
                                           engine));
  };
  using Catch::Matchers::Contains;
  // Line 5, column 17: the value after "  vllm_version: ".
  CHECK_THAT(error("  vllm_version: six"), Contains("bad.yaml:5:17") && Contains("vLLM version"));
  CHECK_THAT(error("  vllm_version: \"0.6.\""), Contains("bad.yaml:5:17"));
  CHECK_THAT(error("  vllm_version: [0, 6]"), Contains("bad.yaml:5:17"));
  CHECK_THAT(error("  vllm_version: \"0.5.4\""), Contains("bad.yaml:5:17") && Contains("0.6.0"));
  // A V0 engine has no async scheduling: the error is at async_scheduling (line 6, column 21).
  CHECK_THAT(error("  vllm_version: \"0.6.0\"\n  async_scheduling: true"),
             Contains("bad.yaml:6:21") && Contains("V0"));
  CHECK_THAT(error("  vllm_version: \"0.6.0\"\n  scheduler: static"), Contains("bad.yaml:6:14"));
  // Well-formed versions load.
  CHECK(error("  vllm_version: \"0.6.1.post1\"") == "no error");
  CHECK(error("  vllm_version: 0.19.0") == "no error");
  CHECK(error("  vllm_version: \"0.6.0\"\n  async_scheduling: false") == "no error");
}
