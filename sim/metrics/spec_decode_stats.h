// Speculative decoding's figures for a policy, as vLLM's SpecDecodingStats counts them
// (vllm/v1/spec_decode/metrics.py): drafts (decode steps that scheduled drafts), their draft
// tokens, the accepted ones in all and at each position; and the output tokens decodes gained
// per step. Only a policy with `speculative_config:` has them (PolicySummary::speculative).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvsim {

struct SpecDecodeStats {
  std::string method;
  int num_speculative_tokens = 0;
  int64_t drafts = 0;           // vLLM's num_drafts
  int64_t draft_tokens = 0;     // num_draft_tokens (fewer than k where the token budget cut one)
  int64_t accepted_tokens = 0;  // num_accepted_tokens
  std::vector<int64_t> accepted_per_position;  // num_accepted_tokens_per_pos
  int64_t decode_steps = 0;   // decodes run (one sequence, one step), with drafts or not
  int64_t decode_tokens = 0;  // output tokens they gained (after max_tokens cut a step short)

  void add_draft(int64_t drafted, int64_t accepted) {
    ++drafts;
    draft_tokens += drafted;
    accepted_tokens += accepted;
    for (int64_t i = 0; i < accepted; ++i) ++accepted_per_position[static_cast<size_t>(i)];
  }
  void merge(const SpecDecodeStats& o) {
    drafts += o.drafts;
    draft_tokens += o.draft_tokens;
    accepted_tokens += o.accepted_tokens;
    for (size_t i = 0; i < accepted_per_position.size() && i < o.accepted_per_position.size();
         ++i) {
      accepted_per_position[i] += o.accepted_per_position[i];
    }
    decode_steps += o.decode_steps;
    decode_tokens += o.decode_tokens;
  }
  // vLLM's log line: "Mean acceptance length" (1 + accepted / drafts, the bonus token counted),
  // "Avg Draft acceptance rate" (accepted / draft tokens), "Per-position acceptance rate"
  // (accepted at i / drafts). 0 with no draft.
  double mean_acceptance_length() const {
    return drafts > 0 ? 1 + static_cast<double>(accepted_tokens) / static_cast<double>(drafts) : 0;
  }
  double draft_acceptance_rate() const {
    return draft_tokens > 0
               ? static_cast<double>(accepted_tokens) / static_cast<double>(draft_tokens)
               : 0;
  }
  std::vector<double> acceptance_per_position() const {
    std::vector<double> out;
    for (int64_t n : accepted_per_position) {
      out.push_back(drafts > 0 ? static_cast<double>(n) / static_cast<double>(drafts) : 0);
    }
    return out;
  }
  // Output tokens a decode gained per step.
  double tokens_per_decode_step() const {
    return decode_steps > 0 ? static_cast<double>(decode_tokens) / static_cast<double>(decode_steps)
                            : 0;
  }
};

}  // namespace kvsim
