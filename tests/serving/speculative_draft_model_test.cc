// Speculative decoding with `method: draft_model` (a separate small model, vLLM's
// DraftModelProposer), worked by hand on llama-3-70b with llama-3-8b as its draft model, both
// under tensor_parallel 4 on A100 80 GB: the KV bytes a token keeps with both models' layers, the
// draft model's weights beside the target's, the pool's blocks, the lookahead slots, the drafter's
// k passes, tokens a step at acceptance 0 and 1, and bad configs at their file:line:col.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "models/latency/profile.h"
#include "models/parallelism.h"
#include "sim/serving/speculative.h"
#include "tests/engine/engine_test_util.h"
#include "tests/serving/speculative_test_util.h"

using namespace kvsim;
using kvsim::test::count;
using kvsim::test::prepare_error;
using kvsim::test::run_yaml;

namespace {

// One policy on llama-3-70b, TP 4 on A100 80 GB, paged blocks of 16, `spec` its
// speculative_config (none when empty), requests of `prompt` + `output` tokens 1 ms apart.
std::string draft_scenario(const std::string& spec, int requests, int prompt, int output) {
  return kvsim::test::spec_scenario("llama-3-70b", spec, requests, prompt, output,
                                    ", tensor_parallel: 4");
}

std::string draft_spec(int k, double rate) {
  return fmt::format(
      "{{method: draft_model, model: llama-3-8b, num_speculative_tokens: {}, "
      "acceptance_rate: {}}}",
      k, rate);
}

// KV bytes a token keeps on one GPU, per layer: 2 (K, V) x 8 KV heads / TP 4 x 128 x 2 B (BF16)
// = 1,024 B, for llama-3-70b's layers and llama-3-8b's alike.
constexpr int64_t kDraftLayerBytes = 1024;

}  // namespace

TEST_CASE(
    "draft_model: the draft model's KV in the pool's blocks and its weights beside the target's",
    "[engine][speculative]") {
  // KV a token: the target's 80 layers x 1,024 = 81,920 B plus the draft's 32 x 1,024 = 32,768 B
  // = 114,688 B = 112 target-sized layers (model_with_draft_model), 16 x 114,688 = 1,835,008 B a
  // block of 16.
  const ModelSpec target = Catalog::builtin().model("llama-3-70b");
  const ModelSpec small = Catalog::builtin().model("llama-3-8b");
  const Parallelism tp4{.tensor = 4};
  const ModelSpec both = model_with_draft_model(target, small, tp4);
  CHECK(both.layers == 112);
  CHECK(gpu_share(both, tp4, 0).kv_bytes_per_token() == 114688);
  CHECK(gpu_share(target, tp4, 0).kv_bytes_per_token() == 81920);
  // llama-3-8b's weights on one GPU of 4: each layer q and o 4096 x 1024, k and v 4096 x 256,
  // the MLP 3 x 4096 x 3584, two norms of 4096 (replicated): 54,534,144 parameters, x 32 layers =
  // 1,745,092,608; embedding and LM head 2 x 32,064 x 4,096 = 262,668,288; the final norm 4,096.
  // 2,007,764,992 parameters, 4,015,529,984 B in BF16.
  CHECK(weights_bytes_on_gpu(small, tp4, 0) == 4015529984);
  CHECK(gpu_share(both, tp4, 0).weights_bytes() ==
        weights_bytes_on_gpu(target, tp4, 0) + 4015529984);

  const PolicySummary plain = run_yaml(draft_scenario("", 1, 10, 2)).policies.at(0);
  const PolicySummary drafted =
      run_yaml(draft_scenario(draft_spec(2, 0.5), 1, 10, 2)).policies.at(0);
  const auto weights = [](const PolicySummary& p) {
    return p.category_peaks_bytes[static_cast<size_t>(MemCategory::kWeights)];
  };
  CHECK(weights(drafted) - weights(plain) == 4015529984);
  // The pool: whole blocks of 1,835,008 B (1,310,720 B without the draft model), and smaller by
  // the draft model's weights to within a block of each either way (the activation peak is the
  // target's: the profile run is the target's pass).
  CHECK(drafted.kv_pool_bytes % (16 * 112 * kDraftLayerBytes) == 0);
  CHECK(plain.kv_pool_bytes % (16 * 80 * kDraftLayerBytes) == 0);
  CHECK(std::abs(plain.kv_pool_bytes - drafted.kv_pool_bytes - 4015529984) <
        16 * 112 * kDraftLayerBytes + 16 * 80 * kDraftLayerBytes);
}

TEST_CASE("draft_model's lookahead slots: context + k drafts + k lookahead, as for EAGLE",
          "[engine][speculative]") {
  // vLLM's Scheduler sets num_lookahead_tokens = k when speculative_config.uses_draft_model()
  // (scheduler.py). Prompt 10, output 2, k = 3: one decode at context 11, 11 + 3 + 3 = 17 slots
  // -> 2 blocks of 16 x 112 layers x 1,024 B.
  const PolicySummary p = run_yaml(draft_scenario(draft_spec(3, 0.5), 1, 10, 2)).policies.at(0);
  const double held = p.kv_pool_peak_occupancy * static_cast<double>(p.kv_pool_bytes);
  CHECK(held / (16.0 * 112 * kDraftLayerBytes) == Approx(2).epsilon(1e-12));
}

TEST_CASE("draft_model: tokens a step at acceptance 1 and 0 as for EAGLE",
          "[engine][speculative]") {
  // Acceptance 1, k = 3: prompt 16, output 42; the prefill gives token 1, then ceil(41 / 4) = 11
  // decode steps of 4 tokens (the last cut to 1): 12 iterations, 33 drafts all accepted.
  const PolicySummary one = run_yaml(draft_scenario(draft_spec(3, 1.0), 1, 16, 42)).policies.at(0);
  CHECK(count(one, Outcome::kCompleted) == 1);
  CHECK(one.batch.iterations == 12);
  REQUIRE(one.speculative.has_value());
  CHECK(one.speculative->draft_tokens == 33);
  CHECK(one.speculative->accepted_tokens == 33);
  // Acceptance 0: output 10, one token a step after the prefill: 9 decode steps of 1 + 3 query
  // tokens, 10 iterations, 16 + 9 x 4 = 52 batch tokens.
  const PolicySummary zero = run_yaml(draft_scenario(draft_spec(3, 0.0), 1, 16, 10)).policies.at(0);
  CHECK(zero.batch.iterations == 10);
  CHECK(zero.speculative->accepted_tokens == 0);
  CHECK(kvsim::test::batch_token_sum(zero) == Approx(52).epsilon(1e-12));
}

TEST_CASE("draft_model's step time: the target verifies, the draft model runs k passes",
          "[engine][speculative]") {
  // Prompt 16, output 2, k = 2, acceptance 0: two iterations, as the EAGLE case but with the whole
  // llama-3-8b (TP 4) as the drafter (vLLM's DraftModelProposer runs EagleProposer's propose loop):
  //   step 1: the target over 16 tokens; the draft model over the same 16, then over 1 row at
  //     context 16 + 1.
  //   step 2: the target verifies 1 + 2 tokens over 16; the draft model over those 3 tokens, then
  //     over 1 row at context 16 + 3 + 1 = 20.
  const PolicySummary p = run_yaml(draft_scenario(draft_spec(2, 0.0), 1, 16, 2)).policies.at(0);
  REQUIRE(p.batch.iterations == 2);
  const Catalog& cat = Catalog::builtin();
  const GpuSpec& gpu = cat.gpu("a100-sxm4-80gb");
  const Parallelism tp4{.tensor = 4};
  const LatencyModel target(cat.model("llama-3-70b"), gpu, default_profile(gpu),
                            AttentionKind::kFlash, tp4);
  const LatencyModel drafter(cat.model("llama-3-8b"), gpu, default_profile(gpu),
                             AttentionKind::kFlash, tp4);
  CHECK(p.batch.busy_s == sim_to_seconds(kvsim::test::TwoSpeculativeSteps().busy(target, drafter)));
}

TEST_CASE("bad draft_model configs fail at their file:line:col", "[engine][speculative]") {
  const auto err = [](const std::string& spec, int tp = 4) {
    return prepare_error(fmt::format(R"(name: bad
model: llama-3-70b
gpu: a100-sxm4-80gb
engine:
  max_model_len: 4096
  tensor_parallel: {}
  speculative_config: {}
workload: {{arrivals: {{type: fixed, rate: 1}}, max_requests: 1, prompt_tokens: 8, output_tokens: 8}}
policies: [{{name: p}}]
)",
                                     tp, spec));
  };
  // Line 7 is the speculative_config line; its map opens at column 23.
  const std::string missing =
      err("{method: draft_model, num_speculative_tokens: 2, acceptance_rate: 0.5}");
  CHECK_THAT(missing, Catch::Contains("bad.yaml:7:32"));  // draft_model, the method's value
  CHECK_THAT(missing, Catch::Contains("needs `model:`"));
  const std::string unknown = err(
      "{method: draft_model, model: llama-9b, num_speculative_tokens: 2, acceptance_rate: 0.5}");
  CHECK_THAT(unknown, Catch::Contains("bad.yaml:7:52"));
  CHECK_THAT(unknown, Catch::Contains("llama-9b"));
  // mistral-7b's vocabulary is 32,000 tokens, llama-3-70b's 128,256.
  const std::string vocab = err(
      "{method: draft_model, model: mistral-7b, num_speculative_tokens: 2, acceptance_rate: 0.5}");
  CHECK_THAT(vocab, Catch::Contains("bad.yaml:7:52"));
  CHECK_THAT(vocab,
             Catch::Contains("vocabulary of 32000 tokens, the target llama-3-70b has 128256"));
  const std::string eagle =
      err("{method: eagle, model: llama-3-8b, num_speculative_tokens: 2, acceptance_rate: 0.5}");
  CHECK_THAT(eagle, Catch::Contains("bad.yaml:7:46"));
  CHECK_THAT(eagle, Catch::Contains("read only with method draft_model"));
  // vLLM's draft_tensor_parallel_size: the target's degree runs; another is not modelled.
  const std::string dtp =
      err("{method: draft_model, model: llama-3-8b, draft_tensor_parallel_size: 1, "
          "num_speculative_tokens: 2, acceptance_rate: 0.5}");
  CHECK_THAT(dtp, Catch::Contains("bad.yaml:7:92"));
  CHECK_THAT(dtp, Catch::Contains("tensor parallelism than the target's (4)"));
  CHECK(err("{method: draft_model, model: llama-3-8b, draft_tensor_parallel_size: 4, "
            "num_speculative_tokens: 2, acceptance_rate: 0.5}") == "no error");
  // TP 2: llama-3-70b alone fits an 80 GB GPU's 0.9 (about 65.7 GiB of weights a GPU), not with
  // llama-3-8b's 7.5 GiB more.
  const std::string full = err(
      "{method: draft_model, model: llama-3-8b, num_speculative_tokens: 2, acceptance_rate: 0.5}",
      2);
  CHECK_THAT(full, Catch::Contains("bad.yaml:7:52"));
  CHECK_THAT(full, Catch::Contains("with draft model llama-3-8b beside llama-3-70b"));
  CHECK(prepare_error(fmt::format(R"(name: ok
model: llama-3-70b
gpu: a100-sxm4-80gb
engine: {{max_model_len: 4096, tensor_parallel: 2}}
workload: {{arrivals: {{type: fixed, rate: 1}}, max_requests: 1, prompt_tokens: 8, output_tokens: 8}}
policies: [{{name: p}}]
)")) == "no error");
}

TEST_CASE("draft_model from a config.json path: Llama-3.2-1B's shape drafting for llama-3-8b",
          "[engine][speculative]") {
  // Llama-3.2-1B's config.json (16 layers, hidden 2048, 32 heads, 8 KV heads of 64, MLP 8192,
  // tied embeddings, vocab 128256 as Llama-3's), written per process.
  const std::string path = fmt::format("/tmp/kvsim_draft_{}.json", getpid());
  {
    std::ofstream f(path);
    f << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 2048,
      "intermediate_size": 8192, "num_attention_heads": 32, "num_key_value_heads": 8,
      "num_hidden_layers": 16, "vocab_size": 128256, "max_position_embeddings": 131072,
      "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";
  }
  const auto run = [&](const std::string& spec) {
    return run_yaml(fmt::format(R"(
name: draft-json
model: llama-3-8b
gpu: a100-sxm4-80gb
engine: {{max_model_len: 4096, kv: {{type: paged, block_size: 16}}{}}}
workload: {{arrivals: {{type: fixed, rate: 1000}}, max_requests: 1, prompt_tokens: 10, output_tokens: 2}}
policies: [{{name: p}}]
)",
                                spec))
        .policies.at(0);
  };
  const PolicySummary plain = run("");
  const PolicySummary drafted = run(fmt::format(
      ", speculative_config: {{method: draft_model, model: {}, num_speculative_tokens: 3, "
      "acceptance_rate: 0.5}}",
      path));
  std::remove(path.c_str());
  // Weights: the embedding once (tied) 128,256 x 2,048 = 262,668,288; a layer q and o 2048 x 2048,
  // k and v 2048 x 512, the MLP 3 x 2048 x 8192, two norms of 2048: 60,821,504, x 16 =
  // 973,144,064; the final norm 2,048. 1,235,814,400 parameters, 2,471,628,800 B in BF16.
  const auto weights = [](const PolicySummary& p) {
    return p.category_peaks_bytes[static_cast<size_t>(MemCategory::kWeights)];
  };
  CHECK(weights(drafted) - weights(plain) == 2471628800);
  // KV a token: 16 x 2 x 8 x 64 x 2 B = 32,768 B = 8 of llama-3-8b's 4,096-B layers: blocks of
  // 16 x 40 x 4,096 = 2,621,440 B. Prompt 10, output 2, k = 3: 17 slots with the lookahead, 2
  // blocks.
  CHECK(drafted.kv_pool_bytes % (16 * 40 * 4096) == 0);
  const double held = drafted.kv_pool_peak_occupancy * static_cast<double>(drafted.kv_pool_bytes);
  CHECK(held / (16.0 * 40 * 4096) == Approx(2).epsilon(1e-12));
}
