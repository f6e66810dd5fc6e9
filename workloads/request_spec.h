// What arrives: one request as a workload generator or a trace reader yields it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/sim_time.h"

namespace kvsim {

// What a generated workload stamps on each request it makes (its `priority:` and
// `max_queue_time_s:` keys; a burst may set its own).
struct RequestTags {
  int64_t priority = 0;
  std::optional<SimTime> max_queue_time;
};

struct RequestSpec {
  int64_t id = 0;       // dense, in arrival order from 0
  SimTime arrival = 0;  // ns since the start of the run
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  // Prefix-block hashes from traces that carry them (Mooncake: one id per `hash_block_tokens`
  // tokens of prompt). Equal leading hashes mean a shareable KV prefix. Empty when unknown.
  std::vector<uint64_t> prefix_hashes;
  int64_t hash_block_tokens = 0;
  int client = -1;  // closed-loop client that sent it, -1 for open-loop traffic
  // Speculative decoding: this request's chance that a draft token is accepted given the one
  // before (the normalized trace's optional `acceptance_rate` column, read to 9 decimals), in
  // billionths, in place of the engine's speculative_config rates; -1: those. An integer in the
  // padding after `client`, so that no request carries more bytes for it.
  int32_t acceptance_nano = -1;
  std::optional<double> acceptance_rate() const {
    if (acceptance_nano < 0) return std::nullopt;
    return static_cast<double>(acceptance_nano) / 1e9;
  }
  // Scheduling priority: lower values are served first, as in vLLM's `priority` scheduling
  // policy. 0 unless the trace or workload gives one.
  int64_t priority = 0;
  // How long the request may wait before it is first scheduled (guard queue and engine waiting
  // queue together) before it ends as timed_out; nullopt: the engine's max_queue_time_s, if any.
  std::optional<SimTime> max_queue_time;
  // The conversation or user it belongs to (FNV-1a of the normalized trace's optional
  // `session_id` cell): what a cluster's session_affinity router keys on. nullopt when not given.
  std::optional<uint64_t> session_id;
};

// A stream of requests in non-decreasing arrival order. Pull one at a time, so a million-request
// trace never has to be held whole.
class WorkloadSource {
 public:
  virtual ~WorkloadSource() = default;
  // The next request, or nullopt at the end. Throws InputError on malformed input.
  virtual std::optional<RequestSpec> next() = 0;
};

}  // namespace kvsim
