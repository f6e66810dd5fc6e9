// Helpers of the speculative-decoding tests: one policy's scenario, a run's batch tokens, and the
// hand-worked time of the two-step run both the EAGLE and the draft-model tests check.
#pragma once

#include <string>

#include <fmt/format.h>

#include "core/sim_time.h"
#include "models/latency/latency_model.h"
#include "sim/metrics/recorder.h"

namespace kvsim::test {

// One policy on `model`, A100 80 GB, paged blocks of 16, `spec` its engine's speculative_config
// (none when empty), `engine_extra` more engine keys (", key: value"), requests of `prompt` +
// `output` tokens arriving 1 ms apart.
inline std::string spec_scenario(const std::string& model, const std::string& spec, int requests,
                                 int prompt, int output, const std::string& engine_extra = "") {
  const std::string sc = spec.empty() ? "" : fmt::format(", speculative_config: {}", spec);
  return fmt::format(R"(
name: spec
model: {}
gpu: a100-sxm4-80gb
engine: {{max_model_len: 4096, kv: {{type: paged, block_size: 16}}{}{}}}
workload:
  arrivals: {{type: fixed, rate: 1000}}
  max_requests: {}
  prompt_tokens: {}
  output_tokens: {}
policies: [{{name: p}}]
)",
                     model, sc, engine_extra, requests, prompt, output);
}

// The query tokens of every iteration, summed.
inline double batch_token_sum(const PolicySummary& p) {
  return p.batch.batch_tokens.mean * static_cast<double>(p.batch.iterations);
}

// One request of prompt 16 and output 2 with k = 2 drafts at acceptance 0 runs two iterations:
//   step 1 (prefill): the target over 16 tokens; the drafter over the same 16, then once more
//     over the one sequence that sampled (context 16 + 1).
//   step 2 (decode): the target verifies 1 + 2 tokens over 16 computed; the drafter over those 3
//     tokens, then once over 1 row at context 16 + 3 + 1 = 20.
// Only the drafter's passes' GPU time counts (ops_seconds: no step overhead of its own).
struct TwoSpeculativeSteps {
  BatchShape prefill, verify, row1, row2;
  TwoSpeculativeSteps() {
    for (BatchShape* s : {&prefill, &verify, &row1, &row2}) s->block_tokens = 16;
    prefill.prefill = {{.tokens = 16, .context_tokens = 0, .emits_token = true}};
    row1.decode_seqs = 1, row1.decode_context_tokens = 17;
    verify.prefill = {{.tokens = 3, .context_tokens = 16, .emits_token = true}};
    row2.decode_seqs = 1, row2.decode_context_tokens = 20;
  }
  // The run's busy time with `drafter` proposing, each step's seconds rounded as the engine does.
  SimTime busy(const LatencyModel& target, const LatencyModel& drafter) const {
    const SimTime d1 =
        seconds_to_sim(target.iteration(prefill).seconds + drafter.iteration(prefill).ops_seconds +
                       drafter.iteration(row1).ops_seconds);
    const SimTime d2 =
        seconds_to_sim(target.iteration(verify).seconds + drafter.iteration(verify).ops_seconds +
                       drafter.iteration(row2).ops_seconds);
    return d1 + d2;
  }
};

}  // namespace kvsim::test
