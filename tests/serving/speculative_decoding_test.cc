// Speculative decoding (engine.speculative_config), worked by hand: tokens a step at acceptance 0
// and 1, the token budget a decode takes with k drafts, the lookahead's KV slots in blocks, the
// step time as the target's verification plus the drafter's passes, the acceptance draw's
// per-position rates, and bad configs at their file:line:col.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "core/config_node.h"
#include "models/latency/profile.h"
#include "sim/serving/engine_config.h"
#include "sim/serving/speculative_config.h"
#include "tests/engine/engine_test_util.h"
#include "tests/serving/speculative_test_util.h"

using namespace kvsim;
using kvsim::test::batch_token_sum;
using kvsim::test::count;
using kvsim::test::prepare_error;
using kvsim::test::run_yaml;

namespace {

// One policy `spec` (its engine section's speculative_config, or none when empty) on llama-3-8b,
// A100 80 GB, paged blocks of 16, requests of `prompt` + `output` tokens arriving 1 ms apart.
std::string scenario(const std::string& spec, int requests, int prompt, int output,
                     const std::string& engine_extra = "") {
  return kvsim::test::spec_scenario("llama-3-8b", spec, requests, prompt, output, engine_extra);
}

}  // namespace

TEST_CASE("speculation at acceptance 1: k = 3 gives 4 tokens a step, N tokens in ceil(N/4) steps",
          "[engine][speculative]") {
  // Prompt 16, output 42: the prefill step gives token 1, leaving 41. Every decode step verifies
  // 1 + 3 tokens and accepts all 3 drafts, so it gains 4: ceil(41 / 4) = 11 decode steps (ten of
  // 4, the last one cut to the 1 token left, as vLLM stops at max_tokens). 12 iterations. vLLM's
  // stats count every draft in full: 11 drafts, 33 draft tokens, 33 accepted.
  const RunResult r = run_yaml(
      scenario("{method: eagle, num_speculative_tokens: 3, acceptance_rate: 1.0}", 1, 16, 42));
  const PolicySummary& p = r.policies.at(0);
  CHECK(count(p, Outcome::kCompleted) == 1);
  CHECK(p.batch.iterations == 12);
  REQUIRE(p.speculative.has_value());
  const SpecDecodeStats& s = *p.speculative;
  CHECK(s.drafts == 11);
  CHECK(s.draft_tokens == 33);
  CHECK(s.accepted_tokens == 33);
  CHECK(s.accepted_per_position == std::vector<int64_t>{11, 11, 11});
  CHECK(s.mean_acceptance_length() == 4.0);
  CHECK(s.decode_steps == 11);
  CHECK(s.decode_tokens == 41);
  // Batch tokens: the 16-token prefill, then 11 steps of 1 + 3 = 4 query tokens.
  CHECK(batch_token_sum(p) == Approx(16 + 11 * 4).epsilon(1e-12));
}

TEST_CASE("speculation at acceptance 0: one token a step, each step still 1 + k tokens of budget",
          "[engine][speculative]") {
  // Prompt 16, output 10: 9 tokens after the prefill, one a step (the bonus token only): 9 decode
  // steps, each verifying 1 + 3 = 4 query tokens. 10 iterations, 16 + 9 x 4 = 52 batch tokens.
  const RunResult r = run_yaml(
      scenario("{method: eagle, num_speculative_tokens: 3, acceptance_rate: 0.0}", 1, 16, 10));
  const PolicySummary& p = r.policies.at(0);
  CHECK(count(p, Outcome::kCompleted) == 1);
  CHECK(p.batch.iterations == 10);
  const SpecDecodeStats& s = *p.speculative;
  CHECK(s.drafts == 9);
  CHECK(s.draft_tokens == 27);
  CHECK(s.accepted_tokens == 0);
  CHECK(s.mean_acceptance_length() == 1.0);
  CHECK(s.tokens_per_decode_step() == 1.0);
  CHECK(batch_token_sum(p) == Approx(52).epsilon(1e-12));
}

TEST_CASE("n decodes with k drafts take n (k + 1) tokens of the budget; the budget cuts drafts",
          "[engine][speculative]") {
  // max_num_batched_tokens 6, k = 3, acceptance 0, chunked prefill; two requests of prompt 2 and
  // output 4, the second arriving while the first's prefill runs (1 ms apart). Synchronous:
  //   step 1: r0 prefills 2                                       -> 2 tokens; r0 has 1
  //   step 2: r0 decodes 1 + 3 (budget 6 -> 2); r1 prefills 2     -> 6; r0 2, r1 1
  //   step 3: r0 1 + 3 (-> 2); r1 min(4, 2) = 1 + 1 draft        -> 6; r0 3, r1 2
  //   step 4: the same                                            -> 6; r0 4 (done), r1 3
  //   step 5: r1 1 + 3                                            -> 4; r1 4 (done)
  // 5 iterations, 24 tokens; drafts: 3 | 3 + 1 | 3 + 1 | 3 = 6 drafts, 14 draft tokens.
  const std::string spec = "{method: eagle, num_speculative_tokens: 3, acceptance_rate: 0.0}";
  const std::string engine = ", chunked_prefill: true, max_num_batched_tokens: 6, max_num_seqs: 4";
  const RunResult r = run_yaml(scenario(spec, 2, 2, 4, engine + ", async_scheduling: false"));
  const PolicySummary& p = r.policies.at(0);
  CHECK(count(p, Outcome::kCompleted) == 2);
  CHECK(p.batch.iterations == 5);
  CHECK(batch_token_sum(p) == Approx(24).epsilon(1e-12));
  CHECK(p.batch.batch_tokens.p99 <= 6.0);
  const SpecDecodeStats& s = *p.speculative;
  CHECK(s.drafts == 6);
  CHECK(s.draft_tokens == 14);
  CHECK(s.decode_steps == 6);
  CHECK(s.decode_tokens == 6);
  // Async (the default): step N+1 is planned before N's output, so r1, arriving during step 1,
  // joins at step 3, and a decode is skipped only once the tokens before the step in flight
  // and that step's sure token reach its output (vLLM: num_computed_tokens + 2 -
  // num_output_placeholders >= prompt + max_tokens):
  //   step 1: r0 prefills 2                                      -> 2; r0 has 1
  //   step 2: r0 1 + 3                                           -> 4; r0 2
  //   step 3: r0 1 + 3 (budget -> 2); r1 prefills 2              -> 6; r0 3, r1 1
  //   step 4: r0 1 + 3 (2 + 1 < 4); r1 min(4, 2) = 1 + 1         -> 6; r0 4 (done), r1 2
  //   step 5: r0 skipped (3 + 1 >= 4); r1 1 + 3                  -> 4; r1 3
  //   step 6: r1 1 + 3                                           -> 4; r1 4 (done)
  // 6 iterations, 26 tokens; 6 drafts of 3 + 3 + 3 + 1 + 3 + 3 = 16 draft tokens.
  const PolicySummary a = run_yaml(scenario(spec, 2, 2, 4, engine)).policies.at(0);
  CHECK(count(a, Outcome::kCompleted) == 2);
  CHECK(a.batch.iterations == 6);
  CHECK(batch_token_sum(a) == Approx(26).epsilon(1e-12));
  CHECK(a.speculative->drafts == 6);
  CHECK(a.speculative->draft_tokens == 16);
}

TEST_CASE("async speculation: a request its accepted drafts finished still runs one more step",
          "[engine][speculative]") {
  // Async scheduling plans step N+1 before N's output (vLLM's AsyncScheduler, placeholders for
  // 1 + k tokens): a request whose accepted drafts in N finish it is scheduled in N+1 all the
  // same, and finishes when N's output comes, before N+1 runs. One request, prompt 16, output 5,
  // k = 3 at acceptance 1:
  //   step 1: the prefill                                        -> 1 token
  //   step 2: 1 + 3, all accepted                                -> 5 tokens: finished
  //   sync:  nothing more: 2 iterations, 16 + 4 batch tokens
  //   async: step 3 was planned before step 2's output: the tokens before step 2 (1) and its
  //          sure token make 2 < 5 (vLLM: num_computed_tokens + 2 - num_output_placeholders =
  //          20 + 2 - 4 < 16 + 5), so it runs 1 + 3 more: 3 iterations, 16 + 4 + 4 tokens.
  // The request ends at step 2's end either way.
  const std::string spec = "{method: eagle, num_speculative_tokens: 3, acceptance_rate: 1.0}";
  const PolicySummary a = run_yaml(scenario(spec, 1, 16, 5)).policies.at(0);
  const PolicySummary s =
      run_yaml(scenario(spec, 1, 16, 5, ", async_scheduling: false")).policies.at(0);
  CHECK(s.batch.iterations == 2);
  CHECK(a.batch.iterations == 3);
  CHECK(batch_token_sum(s) == Approx(16 + 4).epsilon(1e-12));
  CHECK(batch_token_sum(a) == Approx(16 + 4 + 4).epsilon(1e-12));
  CHECK(a.duration_s == s.duration_s);
  CHECK(a.e2e.p50 == s.e2e.p50);
}

TEST_CASE("EAGLE's lookahead slots: KV for context + k drafts + k lookahead, in blocks",
          "[engine][speculative]") {
  // Prompt 10, output 2: one decode step at context 11 (10 + the prefill's token). Blocks of 16.
  //   no speculation: 11 slots                   -> 1 block
  //   ngram, k = 3 (no lookahead): 11 + 3 = 14   -> 1 block
  //   eagle, k = 3: 11 + 3 + 3 lookahead = 17    -> 2 blocks
  // llama-3-8b keeps 2 x 8 KV heads x 128 x 2 B = 4,096 B a token and layer: 32 layers, or 33
  // with EAGLE's draft layer in the same pool (model_with_drafter).
  const auto peak_blocks = [](const std::string& spec, int layers) {
    const RunResult r = run_yaml(scenario(spec, 1, 10, 2));
    const PolicySummary& p = r.policies.at(0);
    const double held = p.kv_pool_peak_occupancy * static_cast<double>(p.kv_pool_bytes);
    return held / (16.0 * 4096 * layers);
  };
  CHECK(peak_blocks("", 32) == Approx(1).epsilon(1e-12));
  CHECK(peak_blocks("{method: ngram, num_speculative_tokens: 3, acceptance_rate: 0.5}", 32) ==
        Approx(1).epsilon(1e-12));
  CHECK(peak_blocks("{method: eagle, num_speculative_tokens: 3, acceptance_rate: 0.5}", 33) ==
        Approx(2).epsilon(1e-12));
}

TEST_CASE("EAGLE's draft layer: its weights and its KV in the pool", "[engine][speculative]") {
  // One llama-3-8b decoder layer: q and o 4096 x 4096 each, k and v 4096 x 1024 each, the MLP
  // 3 x 4096 x 14336, two norms of 4096: 218,112,000 parameters, 436,224,000 B in BF16. The
  // pool's blocks hold 33 layers: 16 x 33 x 4,096 = 2,162,688 B a block. The memory left for KV
  // shrinks by the layer's weights, so the pool does too, to within a block either way.
  const auto run = [](const std::string& spec) {
    return run_yaml(scenario(spec, 1, 10, 2)).policies.at(0);
  };
  const PolicySummary plain = run("");
  const PolicySummary eagle =
      run("{method: eagle, num_speculative_tokens: 2, acceptance_rate: 0.5}");
  const PolicySummary ngram =
      run("{method: ngram, num_speculative_tokens: 2, acceptance_rate: 0.5}");
  const auto weights = [](const PolicySummary& p) {
    return p.category_peaks_bytes[static_cast<size_t>(MemCategory::kWeights)];
  };
  CHECK(weights(eagle) - weights(plain) == 436224000);
  CHECK(weights(ngram) == weights(plain));
  CHECK(ngram.kv_pool_bytes == plain.kv_pool_bytes);
  CHECK(eagle.kv_pool_bytes % 2162688 == 0);
  CHECK(plain.kv_pool_bytes % (16 * 32 * 4096) == 0);
  CHECK(std::abs(plain.kv_pool_bytes - eagle.kv_pool_bytes - 436224000) < 2162688 + 2097152);
}

TEST_CASE("a speculative step's time: the target verifies 1 + k tokens, the drafter runs k passes",
          "[engine][speculative]") {
  // Prompt 16, output 2, EAGLE k = 2, acceptance 0: two iterations.
  //   step 1 (prefill): the target over 16 tokens; the drafter's one layer over the same 16, then
  //     once more over the one sequence that sampled (context 16 + 1).
  //   step 2 (decode): the target verifies 1 + 2 tokens over 16 computed; the drafter's layer
  //     over those 3 tokens, then once over 1 row at context 16 + 3 + 1 = 20.
  // The drafter is llama-3-8b cut to one layer (an EAGLE head: one Llama decoder layer, the
  // target's embedding and LM head); only its passes' GPU time counts (no step overhead).
  const RunResult r = run_yaml(
      scenario("{method: eagle, num_speculative_tokens: 2, acceptance_rate: 0.0}", 1, 16, 2));
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.batch.iterations == 2);
  const Catalog& cat = Catalog::builtin();
  const GpuSpec& gpu = cat.gpu("a100-sxm4-80gb");
  const LatencyModel target(cat.model("llama-3-8b"), gpu, default_profile(gpu),
                            AttentionKind::kFlash);
  ModelSpec head = cat.model("llama-3-8b");
  head.layers = 1;
  const LatencyModel drafter(head, gpu, default_profile(gpu), AttentionKind::kFlash);
  const kvsim::test::TwoSpeculativeSteps steps;
  CHECK(p.batch.busy_s == sim_to_seconds(steps.busy(target, drafter)));
  // ngram drafts on the CPU: the same steps cost the target's passes only.
  const RunResult n = run_yaml(
      scenario("{method: ngram, num_speculative_tokens: 2, acceptance_rate: 0.0}", 1, 16, 2));
  CHECK(n.policies.at(0).batch.busy_s ==
        sim_to_seconds(seconds_to_sim(target.iteration(steps.prefill).seconds) +
                       seconds_to_sim(target.iteration(steps.verify).seconds)));
}

TEST_CASE("the acceptance draw: per-position rates as configured, deterministic",
          "[engine][speculative]") {
  SpeculativeConfig c;
  c.num_speculative_tokens = 3;
  c.acceptance_per_position = {0.8, 0.5, 0.2};
  // 100,000 draws over (request, step): each position's share is its rate within 0.01
  // (3 standard deviations of a binomial share at p = 0.5 are 0.0047), and accepted position i
  // always has i - 1 accepted (the draw counts a prefix).
  std::array<int64_t, 4> at_least{};
  for (int64_t id = 0; id < 1000; ++id) {
    for (int64_t step = 0; step < 100; ++step) {
      const int64_t a = accepted_drafts(c, id, step, 3);
      REQUIRE(a == accepted_drafts(c, id, step, 3));  // same inputs, same draw
      for (int64_t i = 0; i <= a; ++i) ++at_least[static_cast<size_t>(i)];
    }
  }
  CHECK(at_least[0] == 100000);
  CHECK(std::abs(at_least[1] / 1e5 - 0.8) < 0.01);
  CHECK(std::abs(at_least[2] / 1e5 - 0.5) < 0.01);
  CHECK(std::abs(at_least[3] / 1e5 - 0.2) < 0.01);
  // Fewer drafts scheduled (the budget cut them): never more accepted than drafted.
  for (int64_t step = 0; step < 50; ++step) CHECK(accepted_drafts(c, 7, step, 1) <= 1);
  // Rate 1 accepts all, rate 0 none.
  c.acceptance_per_position = {1, 1, 1};
  CHECK(accepted_drafts(c, 3, 4, 3) == 3);
  c.acceptance_per_position = {0, 0, 0};
  CHECK(accepted_drafts(c, 3, 4, 3) == 0);
}

TEST_CASE("speculation runs the same twice, and lowers TPOT where drafts are accepted",
          "[engine][speculative]") {
  const std::string spec =
      "{method: eagle3, num_speculative_tokens: 3, acceptance_per_position: [0.8, 0.6, 0.4]}";
  const RunResult a = run_yaml(scenario(spec, 8, 64, 64));
  const RunResult b = run_yaml(scenario(spec, 8, 64, 64));
  const PolicySummary& pa = a.policies.at(0);
  CHECK(pa.batch.iterations == b.policies.at(0).batch.iterations);
  CHECK(pa.tpot.mean == b.policies.at(0).tpot.mean);
  CHECK(pa.speculative->accepted_tokens == b.policies.at(0).speculative->accepted_tokens);
  const RunResult plain = run_yaml(scenario("", 8, 64, 64));
  CHECK(pa.tpot.mean < plain.policies.at(0).tpot.mean);
}

TEST_CASE("bad speculative configs fail at their file:line:col", "[engine][speculative]") {
  const auto err = [](const std::string& engine_line) {
    return prepare_error(fmt::format(R"(name: bad
model: llama-3-8b
gpu: a100-sxm4-80gb
engine:
  max_model_len: 4096
{}
workload: {{arrivals: {{type: fixed, rate: 1}}, max_requests: 1, prompt_tokens: 8, output_tokens: 8}}
policies: [{{name: p}}]
)",
                                     engine_line));
  };
  // Line 6 is the engine line written; columns count from 1 (0.7 is the 97th character).
  const std::string rising =
      err("  speculative_config: {method: eagle, num_speculative_tokens: 3, "
          "acceptance_per_position: [0.5, 0.7, 0.2]}");
  CHECK_THAT(rising, Catch::Contains("bad.yaml:6:97"));
  CHECK_THAT(rising, Catch::Contains("position 2's rate 0.7 is above position 1's 0.5"));
  const std::string both =
      err("  speculative_config: {method: mtp, num_speculative_tokens: 1, acceptance_rate: 0.5, "
          "acceptance_per_position: [0.5]}");
  CHECK_THAT(both, Catch::Contains("bad.yaml:6:"));
  CHECK_THAT(both, Catch::Contains("give exactly one of acceptance_rate"));
  const std::string length =
      err("  speculative_config: {method: eagle, num_speculative_tokens: 2, "
          "acceptance_per_position: [0.5]}");
  CHECK_THAT(length, Catch::Contains("expected a list of 2 rates"));
  const std::string draft =
      err("  speculative_config: {method: draft_model, num_speculative_tokens: 2, "
          "acceptance_rate: 0.5}");
  CHECK_THAT(draft, Catch::Contains("bad.yaml:6:32"));
  CHECK_THAT(draft, Catch::Contains("draft_model"));
  const std::string rate =
      err("  speculative_config: {method: ngram, num_speculative_tokens: 2, acceptance_rate: 1.5}");
  CHECK_THAT(rate, Catch::Contains("bad.yaml:6:83"));
  const std::string stat =
      err("  scheduler: static\n"
          "  speculative_config: {method: ngram, num_speculative_tokens: 2, acceptance_rate: 0.5}");
  CHECK_THAT(stat, Catch::Contains("bad.yaml:7:23"));
  CHECK_THAT(stat, Catch::Contains("needs scheduler: continuous"));
  const std::string k0 =
      err("  speculative_config: {method: eagle, num_speculative_tokens: 0, acceptance_rate: 0.5}");
  CHECK_THAT(k0, Catch::Contains("bad.yaml:6:"));
}

TEST_CASE("a trace's acceptance_rate column sets one request's acceptance",
          "[engine][speculative]") {
  // EAGLE k = 3 at the engine's rate 1, two requests of prompt 16 and output 9 (8 tokens after the
  // prefill), 10 s apart so that they never share a step:
  //   request 0, acceptance_rate 0 in its row: 1 token a step, 8 decode steps, 0 accepted
  //   request 1, an empty cell (the engine's rate): 4 a step, ceil(8 / 4) = 2 steps, 6 accepted
  // 10 drafts, 30 draft tokens, 6 accepted; 16 output tokens in 10 decode steps.
  const std::filesystem::path dir = kvsim::test::fresh_dir("spec-trace");
  {
    std::ofstream f(dir / "trace.csv");
    f << "arrival_s,prompt_tokens,output_tokens,acceptance_rate\n0,16,9,0\n10,16,9,\n";
  }
  const std::string yaml = fmt::format(R"(
name: spec-trace
model: llama-3-8b
gpu: a100-sxm4-80gb
engine: {{max_model_len: 4096, kv: {{type: paged, block_size: 16}},
         speculative_config: {{method: eagle, num_speculative_tokens: 3, acceptance_rate: 1.0}}}}
workload: {{trace: {{path: '{}', format: normalized}}}}
policies: [{{name: p}}]
)",
                                       (dir / "trace.csv").string());
  const PolicySummary p = run_yaml(yaml).policies.at(0);
  CHECK(count(p, Outcome::kCompleted) == 2);
  const SpecDecodeStats& s = *p.speculative;
  CHECK(s.drafts == 10);
  CHECK(s.draft_tokens == 30);
  CHECK(s.accepted_tokens == 6);
  CHECK(s.decode_steps == 10);
  CHECK(s.decode_tokens == 16);
  // A rate outside [0, 1] is the row's error, at its line.
  {
    std::ofstream f(dir / "bad.csv");
    f << "arrival_s,prompt_tokens,output_tokens,acceptance_rate\n0,16,9,1.5\n";
  }
  std::string bad = yaml;
  bad.replace(bad.find("trace.csv"), 9, "bad.csv");
  const std::string err = prepare_error(bad) + [&] {
    try {
      run_yaml(bad);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  }();
  CHECK_THAT(err, Catch::Contains("bad.csv:2: acceptance_rate: expected a number from 0 to 1"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("async scheduling's default with speculation is vLLM's, by method",
          "[engine][speculative]") {
  // VllmConfig.__post_init__ turns an unset async_scheduling on for EagleModelTypes (eagle,
  // eagle3, mtp) and NgramGPUTypes (ngram_gpu) only: the CPU ngram and draft_model run
  // synchronously unless told otherwise; without speculation it is on.
  auto async_of = [](const std::string& spec) {
    return parse_engine_config(
               ConfigNode::parse_string("{scheduler: continuous, speculative_config: " + spec + "}",
                                        "engine.yaml"))
        .async_scheduling;
  };
  CHECK(parse_engine_config(ConfigNode::parse_string("{scheduler: continuous}", "engine.yaml"))
            .async_scheduling);
  CHECK(async_of("{method: eagle, num_speculative_tokens: 3, acceptance_rate: 0.5}"));
  CHECK(async_of("{method: eagle3, num_speculative_tokens: 3, acceptance_rate: 0.5}"));
  CHECK(async_of("{method: mtp, num_speculative_tokens: 1, acceptance_rate: 0.5}"));
  CHECK(async_of("{method: ngram_gpu, num_speculative_tokens: 3, acceptance_rate: 0.5}"));
  CHECK_FALSE(async_of("{method: ngram, num_speculative_tokens: 3, acceptance_rate: 0.5}"));
  CHECK_FALSE(async_of(
      "{method: draft_model, model: llama-3-8b, num_speculative_tokens: 3, acceptance_rate: 0.5}"));
  // Set explicitly: vLLM raises for the CPU ngram ("only supported with EAGLE/MTP/Draft
  // Model/NGram GPU"); kvsim refuses it at the key (line 1, column 43: the `true`).
  const std::string bad =
      "{scheduler: continuous, async_scheduling: true, speculative_config: {method: ngram, "
      "num_speculative_tokens: 3, acceptance_rate: 0.5}}";
  CHECK_THROWS_WITH(parse_engine_config(ConfigNode::parse_string(bad, "engine.yaml")),
                    Catch::Contains("engine.yaml:1:43") && Catch::Contains("method ngram"));
  CHECK(parse_engine_config(
            ConfigNode::parse_string(
                "{scheduler: continuous, async_scheduling: true, speculative_config: {method: "
                "draft_model, model: llama-3-8b, num_speculative_tokens: 3, acceptance_rate: 0.5}}",
                "engine.yaml"))
            .async_scheduling);
}
