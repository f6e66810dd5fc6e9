// `kvsim-validate vllm-run`: reading a measured vLLM run (a run folder and a vllm bench serve
// result), the scenario its engine arguments become, the serving metrics, and the whole command
// on hand-written runs (tests/data/vllm-runs/).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "models/catalog.h"
#include "validate/vllm_run/measured_run.h"
#include "validate/vllm_run/serving_metrics.h"
#include "validate/vllm_run/vllm_engine.h"
#include "validate/vllm_run/vllm_run.h"

using namespace kvsim;
using namespace kvsim::validate;
using Catch::Matchers::Contains;

namespace {
const std::filesystem::path kRuns = std::filesystem::path(KVSIM_TEST_DATA) / "vllm-runs";

double metric(const ServingMetrics& m, const std::string& name) {
  for (const auto& [k, v] : m) {
    if (k == name) return v;
  }
  FAIL("no metric " << name);
  return 0;
}

std::filesystem::path temp_dir(const std::string& stem) {
  const auto d = std::filesystem::temp_directory_path() /
                 (stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
  std::filesystem::remove_all(d);
  return d;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("a run folder: arrivals at queued_ts - min, TTFT, TPOT and E2E from the server's stamps",
          "[vllm_run]") {
  // r0: queued 1000.0, first 1000.1, last 1000.6, 11 tokens: TTFT 0.1, TPOT 0.5 / 10 = 0.05,
  // E2E 0.6. r1: queued 1000.5, 1 token: TTFT 0.2, no TPOT, E2E 0.2. r2: queued 1000.25,
  // first 1000.55, last 1000.95, 5 tokens: TTFT 0.3, TPOT 0.4 / 4 = 0.1, E2E 0.7. In arrival
  // order: r0 (0), r2 (0.25), r1 (0.5).
  const MeasuredRun run = read_measured_run(kRuns / "tiny");
  CHECK(run.format == "vllm-run");
  REQUIRE(run.requests.size() == 3);
  CHECK(run.requests[0].id == "r0");
  CHECK(run.requests[1].id == "r2");
  CHECK(run.requests[2].id == "r1");
  CHECK(run.requests[1].arrival_s == Approx(0.25).margin(1e-9));
  CHECK(run.requests[0].ttft_s == Approx(0.1).margin(1e-9));
  CHECK(*run.requests[0].tpot_s == Approx(0.05).margin(1e-9));
  CHECK(run.requests[1].e2e_s == Approx(0.7).margin(1e-9));
  CHECK_FALSE(run.requests[2].tpot_s.has_value());
  CHECK(run.engine.model == "meta-llama/Llama-3.1-8B");
  CHECK(run.engine.max_num_seqs == 4);
  CHECK(run.engine.num_gpu_blocks == 64);
  CHECK(run.engine.enable_prefix_caching);  // V1's default when the run does not say
  CHECK(run.engine.gpu_memory_utilization == 0.9);
  CHECK(run.engine.seed == 7);
}

TEST_CASE("serving metrics: means and linearly interpolated percentiles, as np.percentile",
          "[vllm_run]") {
  // The tiny run: TTFT {0.1, 0.3, 0.2}: mean 0.2, p50 0.2, p90 at rank 0.9 x 2 = 1.8: 0.2 + 0.8 x
  // 0.1 = 0.28, p99 at 1.98: 0.298. TPOT {0.05, 0.1}: mean 0.075, p99 at 0.99: 0.0995. E2E {0.6,
  // 0.7, 0.2}: mean 0.5, p99 0.6 + 0.98 x 0.1 = 0.698. Throughput: 17 tokens and 3 requests from
  // 0 to the last finish max(0.6, 0.25 + 0.7, 0.5 + 0.2) = 0.95 s.
  const MeasuredRun run = read_measured_run(kRuns / "tiny");
  std::vector<ServedRequest> rs;
  for (const MeasuredRequest& r : run.requests) {
    rs.push_back({r.arrival_s, r.output_tokens, r.ttft_s, r.e2e_s, r.tpot_s});
  }
  const ServingMetrics m = serving_metrics(rs);
  CHECK(metric(m, "ttft_mean_s") == Approx(0.2));
  CHECK(metric(m, "ttft_p50_s") == Approx(0.2));
  CHECK(metric(m, "ttft_p90_s") == Approx(0.28));
  CHECK(metric(m, "ttft_p99_s") == Approx(0.298));
  CHECK(metric(m, "tpot_mean_s") == Approx(0.075));
  CHECK(metric(m, "tpot_p50_s") == Approx(0.075));
  CHECK(metric(m, "tpot_p99_s") == Approx(0.0995));
  CHECK(metric(m, "e2e_mean_s") == Approx(0.5));
  CHECK(metric(m, "e2e_p99_s") == Approx(0.698));
  CHECK(metric(m, "output_throughput_tok_s") == Approx(17 / 0.95));
  CHECK(metric(m, "request_throughput_req_s") == Approx(3 / 0.95));
}

TEST_CASE("a vllm bench serve result: failed requests left out, E2E = TTFT + the ITLs",
          "[vllm_run]") {
  // Request 1 failed ("Read timed out", no tokens). Request 0: start 10.5, TTFT 0.05, ITLs 0.02
  // and 0.03: E2E 0.10, TPOT 0.05 / 2 = 0.025. Request 2: start 11.0 (0.5 after the first),
  // TTFT 0.08, ITL 0.04: E2E 0.12, TPOT 0.04.
  const MeasuredRun run = read_measured_run(kRuns / "bench-serve.json");
  CHECK(run.format == "vllm-bench-serve");
  CHECK(run.skipped_failed == 1);
  CHECK_FALSE(run.engine_from_meta);
  CHECK(run.engine.model == "meta-llama/Llama-3.1-8B");  // model_id
  REQUIRE(run.requests.size() == 2);
  CHECK(run.requests[0].e2e_s == Approx(0.10));
  CHECK(*run.requests[0].tpot_s == Approx(0.025));
  CHECK(run.requests[1].arrival_s == Approx(0.5));
  CHECK(run.requests[1].e2e_s == Approx(0.12));
  CHECK(*run.requests[1].tpot_s == Approx(0.04));
}

TEST_CASE("bad measured runs are one line naming the file and line", "[vllm_run][bad-input]") {
  try {
    read_measured_run(kRuns / "bad");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Contains("bad/requests.jsonl:2:") && Contains("malformed JSON"));
  }
  CHECK_THROWS_WITH(read_measured_run(kRuns / "no-such-run"), Contains("no such run folder"));
  CHECK_THROWS_WITH(read_measured_run(kRuns), Contains("no meta.json"));
}

TEST_CASE("vLLM's engine arguments become the scenario, with vLLM's defaults where unset",
          "[vllm_run]") {
  const Catalog& c = Catalog::builtin();
  // EngineArgs.get_batch_defaults: >= 70 GiB and not an A100: 1024 sequences, 8192 tokens.
  CHECK(default_max_num_seqs(c.gpu("rtx-pro-6000")) == 1024);
  CHECK(default_max_num_batched_tokens(c.gpu("rtx-pro-6000")) == 8192);
  CHECK(default_max_num_seqs(c.gpu("a100-sxm4-80gb")) == 256);
  CHECK(default_max_num_batched_tokens(c.gpu("rtx-4090")) == 2048);
  CHECK(catalog_model_for("meta-llama/Llama-3.1-8B") == "llama-3.1-8b");
  CHECK(catalog_model_for("some-org/No-Such-Model") == "");

  VllmScenarioInputs in;
  in.engine = read_measured_run(kRuns / "tiny").engine;
  in.model = "llama-3.1-8b";
  in.gpu = "rtx-pro-6000";
  in.trace = "/tmp/trace.csv";
  // num_gpu_blocks_override 64: vLLM's BlockPool keeps one as its null block, 63 usable.
  const std::string y = vllm_scenario_yaml(in, c.gpu("rtx-pro-6000"));
  CHECK_THAT(y, Contains("max_num_seqs: 4\n") && Contains("max_num_batched_tokens: 512\n") &&
                    Contains("max_model_len: 4096\n") && Contains("num_blocks: 63\n") &&
                    Contains("chunked_prefill: true") && Contains("enable_prefix_caching: true") &&
                    Contains("weights_dtype: bf16"));
  in.engine.num_gpu_blocks.reset();
  in.engine.max_num_seqs.reset();
  const std::string d = vllm_scenario_yaml(in, c.gpu("rtx-pro-6000"));
  CHECK_THAT(d, Contains("gpu_memory_utilization: 0.9\n") && Contains("max_num_seqs: 1024\n"));
  // meta.json's top-level vllm_version ("0.19.0" in tiny/meta.json) selects the host path.
  CHECK(in.engine.vllm_version == "0.19.0");
  CHECK_THAT(d, Contains("  vllm_version: \"0.19.0\"\n"));
  in.engine.vllm_version.clear();  // not recorded: V1's, kvsim's default, and no key
  CHECK_THAT(vllm_scenario_yaml(in, c.gpu("rtx-pro-6000")), !Contains("vllm_version"));
}

TEST_CASE("vllm-run on a bench serve file: kvsim's run files, e2e.json and the measured requests",
          "[vllm_run]") {
  const auto out = temp_dir("kvsim-vllm-run");
  VllmRunOptions o;
  o.run = kRuns / "bench-serve.json";
  o.gpu = "rtx-pro-6000";
  o.out_dir = out;
  o.quiet = true;
  o.plot = false;
  const double worst = run_vllm_run(o);
  CHECK(std::isfinite(worst));
  for (const char* f :
       {"requests.csv", "summary.json", "timeseries.csv", "manifest.json", "scenario.yaml",
        "trace.csv", "measured_requests.csv", "e2e.json", "e2e.txt"}) {
    INFO(f);
    CHECK(std::filesystem::is_regular_file(out / f));
  }
  const auto j = nlohmann::json::parse(slurp(out / "e2e.json"));
  CHECK(j["run"]["format"] == "vllm-bench-serve");
  CHECK(j["run"]["skipped_failed"] == 1);
  CHECK(j["kvsim"]["requests_completed"] == 2);
  // Measured TTFT mean (0.05 + 0.08) / 2 = 0.065 s; the error is (kvsim - measured) / measured.
  bool seen = false;
  for (const auto& m : j["metrics"]) {
    if (m["metric"] != "ttft_mean_s") continue;
    seen = true;
    CHECK(m["measured"].get<double>() == Approx(0.065));
    const double sim = m["simulated"].get<double>();
    CHECK(sim > 0);
    CHECK(m["error_pct"].get<double>() == Approx(100 * (sim - 0.065) / 0.065));
  }
  CHECK(seen);
  // The two requests that succeeded (100 and 60 prompt tokens; the failed one is not replayed).
  CHECK(slurp(out / "trace.csv") ==
        "arrival_s,prompt_tokens,output_tokens\n0.000000000,100,3\n0.500000000,60,2\n");
  std::filesystem::remove_all(out);
}

namespace {
// vllm-run on a copy of tests/data/vllm-runs/moe-dp-ep whose engine_kwargs take `changes`;
// the run's summary.json.
nlohmann::json moe_run(const nlohmann::json& changes, const std::string& model = "") {
  const auto run = temp_dir("kvsim-vllm-moe-run");
  const auto out = temp_dir("kvsim-vllm-moe-out");
  std::filesystem::create_directories(run);
  std::filesystem::copy_file(kRuns / "moe-dp-ep" / "requests.jsonl", run / "requests.jsonl");
  nlohmann::json meta = nlohmann::json::parse(slurp(kRuns / "moe-dp-ep" / "meta.json"));
  for (const auto& [k, v] : changes.items()) meta["engine_kwargs"][k] = v;
  std::ofstream(run / "meta.json") << meta.dump(2);
  VllmRunOptions o;
  o.run = run;
  o.gpu = "rtx-pro-6000";
  o.model = model;
  o.out_dir = out;
  o.quiet = true;
  o.plot = false;
  CHECK(std::isfinite(run_vllm_run(o)));
  nlohmann::json s = nlohmann::json::parse(slurp(out / "summary.json"));
  s["scenario_yaml"] = slurp(out / "scenario.yaml");
  std::filesystem::remove_all(run);
  std::filesystem::remove_all(out);
  return s;
}
}  // namespace

TEST_CASE("a Qwen3-MoE run with DP and EP: each replica holds its share of the experts",
          "[vllm_run][moe]") {
  // Qwen3-30B-A3B BF16 on one RTX PRO 6000 per rank, TP 1. Parameters per layer: Q, O 2 x 2048
  // x 4096 = 16,777,216; K, V 2 x 2048 x 512 = 2,097,152; norms 4,096 and per-head q/k norms
  // 256; router 2048 x 128 = 262,144; one expert 3 x 2048 x 768 = 4,718,592. Outside the
  // layers: embedding and LM head 2 x 151,936 x 2048 = 622,329,856; final norm 2,048.
  // DP 1 (EP has no effect on one GPU): 128 experts, 623,120,640 a layer x 48 = 29,909,790,720;
  // + 622,331,904 = 30,532,122,624 parameters = 61,064,245,248 bytes.
  // DP 2 + EP: 64 whole experts a GPU (determine_expert_map), 321,130,752 a layer x 48 =
  // 15,414,276,096; + 622,331,904 = 16,036,608,000 parameters = 32,073,216,000 bytes.
  // DP 2 without EP: every GPU holds half of each of the 128 experts (flatten_tp_across_dp):
  // 128 x 3 x 2048 x 384 = 64 x 4,718,592, the same bytes as with EP.
  // KV per token: 48 x 2 x 4 x 128 x 2 = 98,304 bytes, all 4 KV heads on each rank.
  // Pool: the same rule on each (same GPU, utilisation, batch limits, so the same profile-run
  // activation and non-torch memory); DP 2 frees 61,064,245,248 - 32,073,216,000 =
  // 28,991,029,248 bytes = 294,912 tokens (18,432 blocks of 16) more than DP 1.
  const nlohmann::json dp1 = moe_run({{"data_parallel_size", 1}});
  const nlohmann::json ep =
      moe_run({}, std::string(KVSIM_TEST_DATA) + "/hf-configs/qwen3-30b-a3b-instruct-2507.json");
  const nlohmann::json no_ep = moe_run({{"enable_expert_parallel", false}});
  const auto layout = [](const nlohmann::json& s) { return s["policies"][0]["gpu_layout"]; };
  CHECK(layout(dp1)["weights_bytes_per_gpu"] == 61'064'245'248);
  CHECK(layout(ep)["weights_bytes_per_gpu"] == 32'073'216'000);
  CHECK(layout(no_ep)["weights_bytes_per_gpu"] == 32'073'216'000);
  CHECK(layout(ep)["kv_bytes_per_token_per_gpu"] == 98'304);
  const int64_t pool1 = layout(dp1)["kv_pool_tokens_per_gpu"].get<int64_t>();
  CHECK(pool1 % 16 == 0);
  CHECK(layout(ep)["kv_pool_tokens_per_gpu"] == pool1 + 294'912);
  CHECK(layout(no_ep)["kv_pool_tokens_per_gpu"] == pool1 + 294'912);
  // Two replicas, each a data-parallel rank with its share of the experts; every request served.
  CHECK(ep["policies"][0]["replicas"].size() == 2);
  CHECK(ep["policies"][0]["requests_total"] == 3);
  CHECK_THAT(ep["scenario_yaml"].get<std::string>(),
             Contains("engine: {data_parallel: 2, expert_parallel: true}"));
  CHECK_THAT(no_ep["scenario_yaml"].get<std::string>(),
             Contains("engine: {data_parallel: 2, expert_parallel: false}"));
  CHECK_THAT(dp1["scenario_yaml"].get<std::string>(), !Contains("expert_parallel"));
}

TEST_CASE("EP on a dense model or a lone GPU changes nothing, as in vLLM", "[vllm_run][moe]") {
  // vLLM turns EP on only for FusedMoE layers and a DP x TP group of more than one GPU; a dense
  // model's DP replicas are independent engines.
  const Catalog& c = Catalog::builtin();
  VllmScenarioInputs in;
  in.engine = read_measured_run(kRuns / "tiny").engine;
  in.engine.expert_parallel = true;
  in.model = "llama-3.1-8b";
  in.gpu = "rtx-pro-6000";
  in.trace = "/tmp/trace.csv";
  CHECK_THAT(vllm_scenario_yaml(in, c.gpu("rtx-pro-6000")), !Contains("expert_parallel"));
  in.engine.data_parallel = 2;
  const std::string dense_dp = vllm_scenario_yaml(in, c.gpu("rtx-pro-6000"));
  CHECK_THAT(dense_dp, Contains("count: 2\n") && !Contains("data_parallel"));
  // vLLM's DP front end balances dense and MoE ranks alike (DPLBAsyncMPClient).
  CHECK_THAT(dense_dp, Contains("router: {type: dp_balance}"));
  in.model = "qwen3-30b-a3b";
  in.moe = true;
  in.engine.data_parallel = 1;
  in.engine.tensor_parallel = 2;  // EP over the TP group of one engine
  CHECK_THAT(vllm_scenario_yaml(in, c.gpu("rtx-pro-6000")), Contains("  expert_parallel: true\n"));
}
