// `kvsim-validate vllm-run` under bad input: every engine argument carried into the replay or
// refused at its line:col, deep or huge JSON values refused in one short line, bench serve
// values checked, a measured 0 reported as n/a, and a refused run writing nothing into OUT.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config_node.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "sim/config/scenario.h"
#include "sim/serving/engine_config.h"
#include "validate/vllm_run/measured_run.h"
#include "validate/vllm_run/vllm_engine.h"
#include "validate/vllm_run/vllm_run.h"

using namespace kvsim;
using namespace kvsim::validate;
using Catch::Matchers::Contains;

namespace {

const std::filesystem::path kRunsDir = std::filesystem::path(KVSIM_TEST_DATA) / "vllm-runs";

std::filesystem::path fresh_dir(const std::string& stem) {
  static int n = 0;
  const auto d =
      std::filesystem::temp_directory_path() / fmt::format("{}-{}-{}", stem, ::getpid(), n++);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::string slurp_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

// A run folder: tiny's requests.jsonl and a meta.json whose engine_kwargs are `kwargs` (text, so
// a test can place a value at a known line:col).
std::filesystem::path run_with_kwargs(const std::string& kwargs) {
  const auto d = fresh_dir("kvsim-vllm-bad");
  std::filesystem::copy_file(kRunsDir / "tiny" / "requests.jsonl", d / "requests.jsonl");
  write_file(d / "meta.json",
             "{\"model\": \"meta-llama/Llama-3.1-8B\",\n\"engine_kwargs\": " + kwargs + "}\n");
  return d;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::string read_error(const std::filesystem::path& run) {
  return error_of([&] { read_measured_run(run); });
}

// A bench serve result of two requests with `changes` applied to its lists.
std::filesystem::path bench_with(const nlohmann::json& changes) {
  nlohmann::json j = {{"model_id", "meta-llama/Llama-3.1-8B"},
                      {"input_lens", {100, 60}},
                      {"output_lens", {3, 2}},
                      {"ttfts", {0.05, 0.08}},
                      {"itls", {{0.02, 0.03}, {0.04}}},
                      {"start_times", {10.5, 11.0}}};
  for (const auto& [k, v] : changes.items()) j[k] = v;
  const auto d = fresh_dir("kvsim-vllm-bench");
  write_file(d / "bench.json", j.dump());
  return d / "bench.json";
}

}  // namespace

TEST_CASE(
    "speculative_config, async_scheduling false and long_prefill_token_threshold reach the "
    "replayed scenario",
    "[vllm_run][bad-input]") {
  const Catalog& c = Catalog::builtin();
  VllmScenarioInputs in;
  in.engine = read_measured_run(run_with_kwargs(
                                    R"({"max_num_seqs": 4, "async_scheduling": false,
"speculative_config": {"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
  "num_speculative_tokens": 3, "acceptance_rate": 0.7}})"))
                  .engine;
  in.model = "llama-3.1-8b";
  in.gpu = "rtx-pro-6000";
  in.trace = "/tmp/trace.csv";
  const std::string y = vllm_scenario_yaml(in, c.gpu("rtx-pro-6000"));
  // The EAGLE drafter's checkpoint name is not carried: kvsim builds it from the target's shape.
  CHECK_THAT(
      y, Contains("  async_scheduling: false\n") &&
             Contains("  speculative_config: {\"method\":\"eagle\",\"num_speculative_tokens\":3,"
                      "\"acceptance_rate\":0.7}\n"));
  // The scenario loads with them: 3 drafts, position i accepted with 0.7^i, synchronous.
  (void)load_scenario(ConfigNode::parse_string(y, "scenario.yaml"), c);
  const EngineConfig e =
      parse_engine_config(ConfigNode::parse_string(y, "scenario.yaml").child("engine"));
  CHECK_FALSE(e.async_scheduling);
  REQUIRE(e.speculative);
  CHECK(e.speculative->num_speculative_tokens == 3);
  CHECK(e.speculative->acceptance_per_position.at(2) == Approx(0.343));

  in.engine = read_measured_run(run_with_kwargs(R"({"long_prefill_token_threshold": 256})")).engine;
  const std::string t = vllm_scenario_yaml(in, c.gpu("rtx-pro-6000"));
  CHECK_THAT(t, Contains("  long_prefill_token_threshold: 256\n"));
  CHECK(parse_engine_config(ConfigNode::parse_string(t, "scenario.yaml").child("engine"))
            .long_prefill_token_threshold == 256);

  // vLLM's --enforce-eager and --disable-custom-all-reduce decide how the all-reduce runs.
  in.engine = read_measured_run(
                  run_with_kwargs(R"({"enforce_eager": true, "disable_custom_all_reduce": true})"))
                  .engine;
  in.p2p = "off";  // kvsim-validate vllm-run --p2p off: the host's GPUs do not reach each other
  const std::string g = vllm_scenario_yaml(in, c.gpu("rtx-pro-6000"));
  const EngineConfig ge =
      parse_engine_config(ConfigNode::parse_string(g, "scenario.yaml").child("engine"));
  CHECK(ge.enforce_eager);
  CHECK(ge.disable_custom_all_reduce);
  CHECK(ge.p2p == P2pSetting::kOff);
}

TEST_CASE("an engine argument kvsim does not carry is refused at its line:col",
          "[vllm_run][bad-input]") {
  // Line 2 of meta.json is `"engine_kwargs": {...}`: 17 characters of `"engine_kwargs": `, the
  // object's '{' at column 18, its first key's quote at 19; `"max_num_seqs": 4, ` is 19 more,
  // so the quote of "cpu_offload_gb" is at column 38.
  CHECK_THAT(read_error(run_with_kwargs(R"({"max_num_seqs": 4, "cpu_offload_gb": 4})")),
             Contains("meta.json:2:38: engine argument 'cpu_offload_gb' is not carried"));
  CHECK_THAT(
      read_error(run_with_kwargs(R"("oops")")),
      Contains("meta.json:2:1: 'engine_kwargs': expected an object") && Contains("got \"oops\""));
  CHECK_THAT(read_error(run_with_kwargs(R"({"speculative_config": {"method": "ngram",
"num_speculative_tokens": 2}})")),
             Contains("meta.json:2:19: speculative_config: vLLM records no acceptance rate"));
  CHECK_THAT(read_error(run_with_kwargs(R"({"speculative_config": {"method": "ngram",
"num_speculative_tokens": 2, "prompt_lookup_max": 5, "acceptance_rate": 0.5}})")),
             // `"num_speculative_tokens": 2, ` is 29 characters: the key's quote at column 30.
             Contains("meta.json:3:30: speculative_config 'prompt_lookup_max': not modelled"));
  // Checked here, at meta.json's own line:col, not in the scenario kvsim would write.
  CHECK_THAT(read_error(run_with_kwargs(R"({"dtype": "int8"})")),
             Contains("meta.json:2:19: 'dtype': \"int8\": expected auto"));
  CHECK_THAT(read_error(run_with_kwargs(R"({"tensor_parallel_size": 65})")),
             Contains("meta.json:2:19: 'tensor_parallel_size': expected an integer in [1, 64]"));
  CHECK_THAT(read_error(run_with_kwargs(R"({"max_num_seqs": 18446744073709551615})")),
             Contains("expected an integer in [1, 1048576], got 18446744073709551615"));
}

TEST_CASE("a 100,000-deep or 10 MB JSON value is refused in one short line",
          "[vllm_run][bad-input]") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  // meta.json, line 2: `"engine_kwargs": {"max_num_seqs": [[[...`. The top-level object and
  // engine_kwargs are levels 1 and 2, so the list opening level 65 is the 63rd '[': the first
  // is at column 35 (17 characters of `"engine_kwargs": `, 17 of `{"max_num_seqs": `), the
  // 63rd at 35 + 62 = 97.
  std::string e = read_error(run_with_kwargs("{\"max_num_seqs\": " + deep + "}"));
  CHECK_THAT(e, Contains("meta.json:2:97: malformed JSON: nested deeper than 64 levels"));
  CHECK(e.size() < 300);
  // A requests.jsonl line, the column counted within it: `{"input_toks": ` puts the first '['
  // (level 2) at column 16, the 64th (level 65) at 16 + 63 = 79.
  const auto run = run_with_kwargs("{}");
  write_file(run / "requests.jsonl", "{\"input_toks\": " + deep + "}\n");
  CHECK_THAT(read_error(run), Contains("requests.jsonl:1:79: malformed JSON: nested deeper"));
  e = read_error(bench_with(
      {{"ttfts", {nlohmann::json::parse(std::string(60, '[') + std::string(60, ']')), 0.08}}}));
  CHECK_THAT(e, Contains("'ttfts'[0]: expected a number >= 0, got a list of 1 element(s)"));
  CHECK(e.size() < 300);
  // A 10 MB string is cut in the message.
  e = read_error(run_with_kwargs("{\"dtype\": \"" + std::string(10'000'000, 'x') + "\"}"));
  CHECK_THAT(e, Contains("'dtype': \"xxxx") && Contains("...\": expected auto"));
  CHECK(e.size() < 300);
}

TEST_CASE("bench serve values are checked: no negative, extra, fractional or huge figures",
          "[vllm_run][bad-input]") {
  using J = nlohmann::json;
  CHECK_THAT(
      read_error(bench_with({{"ttfts", {0.05, -0.08}}})),
      Contains("bench.json:1:") && Contains("'ttfts'[1]: expected a number >= 0, got -0.08"));
  CHECK_THAT(read_error(bench_with({{"itls", {{0.02, -0.03}, {0.04}}}})),
             Contains("'itls'[0]: expected seconds >= 0, got -0.03"));
  // Request 1 has 2 output tokens: at most 1 gap between them.
  CHECK_THAT(read_error(bench_with({{"itls", {{0.02, 0.03}, {0.04, 0.04}}}})),
             Contains("'itls'[1]: 2 inter-token gaps for 2 output tokens (at most 1)"));
  CHECK_THAT(
      read_error(bench_with({{"input_lens", {100.5, 60}}})),
      Contains("'input_lens'[0]: expected a token count (an integer in [0, 2^32]), got 100.5"));
  CHECK_THAT(read_error(bench_with({{"output_lens", {3, 1e30}}})),
             Contains("'output_lens'[1]: expected a token count"));
  // 1e308 + 1e308 overflows: the mean would be inf, then null in e2e.json.
  CHECK_THAT(read_error(bench_with({{"itls", {{1e308, 1e308}, {0.04}}}})),
             Contains("'itls'[0]: TTFT plus the gaps is not a finite number of seconds"));
  CHECK_THAT(read_error(bench_with({{"start_times", {10.5, J(nullptr)}}})),
             Contains("'start_times'[1]: expected a number"));
}

TEST_CASE("a prompt longer than max_model_len is refused, not compared over another request set",
          "[vllm_run][bad-input]") {
  // tiny's line 1 has 100 prompt tokens.
  CHECK_THAT(read_error(run_with_kwargs(R"({"max_model_len": 50})")),
             Contains("requests.jsonl:1: 100 prompt tokens, above the run's max_model_len 50"));
}

TEST_CASE("a refused vllm-run writes nothing; a measured 0 is n/a, not 0% error",
          "[vllm_run][bad-input]") {
  const auto out = fresh_dir("kvsim-vllm-out");
  write_file(out / "trace.csv", "an earlier result\n");
  VllmRunOptions o;
  o.gpu = "rtx-pro-6000";
  o.out_dir = out;
  o.quiet = true;
  o.plot = false;
  // 65,536 blocks of Llama-3.1-8B's 2 MiB do not fit an RTX PRO 6000: refused while the run is
  // set up, before the first file is written.
  o.run = run_with_kwargs(R"({"num_gpu_blocks_override": 65536})");
  CHECK_THAT(error_of([&] { run_vllm_run(o); }), Contains("do not fit"));
  CHECK(slurp_file(out / "trace.csv") == "an earlier result\n");
  CHECK(std::distance(std::filesystem::directory_iterator(out), {}) == 1);

  // Both TTFTs measured 0 (a server's clock that did not tick): every TTFT figure is 0. OUT
  // holds an earlier result's figure: a result's marks go before its first new file is written,
  // so this run (without --plot) leaves no e2e.png beside its new files.
  write_file(out / "e2e.png", "an earlier figure");
  o.run = bench_with({{"ttfts", {0.0, 0.0}}});
  const double worst = run_vllm_run(o);
  const auto j = nlohmann::json::parse(slurp_file(out / "e2e.json"));
  for (const auto& m : j["metrics"]) {
    const std::string name = m["metric"];
    INFO(name);
    if (name.rfind("ttft", 0) == 0) CHECK(m["error_pct"].is_null());
  }
  CHECK(std::isfinite(worst));
  CHECK_THAT(slurp_file(out / "e2e.txt"), Contains("n/a") && !Contains("nan%"));
  CHECK_FALSE(std::filesystem::exists(out / "e2e.png"));
}

TEST_CASE("the bad vllm-run catalogue: one line each, at the file:line:col its sidecar names",
          "[vllm_run][bad-input]") {
  // tests/data/bad/vllm-run/: NAME.meta.json read as a meta.json, NAME.bench.json as a vllm
  // bench serve result; NAME.expected holds the message (a substring).
  int seen = 0;
  for (const auto& f : std::filesystem::directory_iterator(std::filesystem::path(KVSIM_TEST_DATA) /
                                                           "bad" / "vllm-run")) {
    const std::string name = f.path().filename().string();
    if (f.path().extension() != ".json") continue;
    INFO(name);
    std::string expected = slurp_file(f.path().string() + ".expected");
    expected.erase(expected.find('\n'));
    const std::string e = name.find(".meta.") != std::string::npos
                              ? error_of([&] { read_vllm_meta(f.path()); })
                              : read_error(f.path());
    CHECK_THAT(e, Contains(expected));
    CHECK(e.find('\n') == std::string::npos);
    CHECK(e.size() < 1000);
    ++seen;
  }
  CHECK(seen == 11);
}
