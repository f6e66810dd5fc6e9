// A declared step time, in place of the roofline's seconds: every engine iteration lasts
//   fixed + per_token x tokens + per_seq x sequences
// (tokens: the step's prefill and decode tokens; sequences: the requests it runs). For what-if
// studies that hold the iteration cost fixed, and for the vLLM conformance goldens
// (docs/vllm-conformance.md), whose recorder times vLLM's steps by the same formula so that
// recalibrating the latency model never moves them. The three terms are whole nanoseconds
// (the scenario's seconds, rounded), so a step's duration is one exact integer on both sides.
// The FLOPs the engine records stay the latency model's.
#pragma once

#include <cstdint>

#include "core/sim_time.h"
#include "models/latency/latency_model.h"

namespace kvsim {

class ConfigNode;

struct FixedStepTime {
  int64_t fixed_ns = 0;
  int64_t per_token_ns = 0;
  int64_t per_seq_ns = 0;

  // At least 1 ns, as every iteration.
  SimTime duration(int64_t tokens, int64_t seqs) const {
    const int64_t ns = fixed_ns + per_token_ns * tokens + per_seq_ns * seqs;
    return ns > 1 ? ns : 1;
  }
  // A decode-only step of n sequences (one token each): `modeled`'s FLOPs with this duration,
  // which does not depend on the context.
  DecodeStepFixed decode_step(DecodeStepFixed modeled, int64_t n) const;
  bool operator==(const FixedStepTime&) const = default;
};

// The engine's `step_time:` map: {fixed_s, per_token_s, per_seq_s} (seconds, each >= 0, absent
// = 0; at least one positive). Throws ConfigError at the offending key.
FixedStepTime parse_fixed_step_time(const ConfigNode& node);

}  // namespace kvsim
