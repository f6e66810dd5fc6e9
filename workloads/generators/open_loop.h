// Open-loop synthetic traffic: arrivals that do not wait for the server (Poisson, bursty gamma or
// fixed-rate), lengths from LengthDists, plus injected bursts (seed A's sudden long-context
// traffic), merged into one WorkloadSource in arrival order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "workloads/lengths.h"
#include "workloads/random.h"
#include "workloads/request_spec.h"

namespace kvsim {

class ConfigNode;

struct ArrivalProcess {
  enum class Type { kPoisson, kGamma, kFixed };
  Type type = Type::kPoisson;
  double rate_per_s = 1.0;
  double cv = 1.0;  // gamma: coefficient of variation of the gaps (1 = Poisson, > 1 bursty)
  // Reads {type: poisson|gamma|fixed, rate: R[, cv: C]} through the arrival process registry.
  static ArrivalProcess parse(const ConfigNode& node);
};

// The arrival process registry: `arrivals: {type: ...}` names one of its entries. Adding a
// process takes one add() in register_arrival_processes() (open_loop.cc) and its gap sampler
// in OpenLoopSource::next_base_time().
struct ArrivalProcessFactory {
  std::string example;  // a small valid node: "{type: poisson, rate: 2}" (docs, contract tests)
  std::function<ArrivalProcess(const ConfigNode& node)> parse;
};
using ArrivalProcessRegistry = Registry<ArrivalProcessFactory>;
void register_arrival_processes(ArrivalProcessRegistry& registry);  // poisson, gamma, fixed
const ArrivalProcessRegistry& arrival_process_registry();

// `count` requests at `at`, spread evenly over [at, at + over) (all at `at` when over is 0).
struct Burst {
  SimTime at = 0;
  SimTime over = 0;
  int64_t count = 0;
  LengthDist prompt_tokens = LengthDist::fixed(1);
  LengthDist output_tokens = LengthDist::fixed(1);
  // The burst's own priority / max_queue_time_s; nullopt: the workload's (OpenLoopParams::tags).
  std::optional<int64_t> priority;
  std::optional<SimTime> max_queue_time;
  // Reads {at_s, count, prompt_tokens, output_tokens[, over_s, priority, max_queue_time_s]}.
  static Burst parse(const ConfigNode& node);
};

struct OpenLoopParams {
  std::optional<ArrivalProcess> arrivals;  // none: bursts only
  LengthDist prompt_tokens = LengthDist::fixed(1);
  LengthDist output_tokens = LengthDist::fixed(1);
  std::optional<SimTime> duration;      // base arrivals at t < duration
  std::optional<int64_t> max_requests;  // base arrivals (bursts come on top)
  std::vector<Burst> bursts;
  RequestTags tags;  // stamped on base arrivals, and on burst requests that set none of their own
};

// The base arrivals and the bursts merged by time (a base arrival first at equal times, then
// bursts in list order). Ids are dense from *next_id in emission order; `next_id` may be shared
// with ClosedLoopClients so a closed-loop run with bursts has one id space.
class OpenLoopSource final : public WorkloadSource {
 public:
  OpenLoopSource(OpenLoopParams params, uint64_t seed,
                 std::shared_ptr<int64_t> next_id = std::make_shared<int64_t>(0));
  std::optional<RequestSpec> next() override;

 private:
  std::optional<SimTime> next_base_time();  // advances the arrival process once
  void peek_base();

  OpenLoopParams p_;
  Rng arrival_rng_, prompt_rng_, output_rng_;
  std::vector<Rng> burst_rngs_;
  std::shared_ptr<int64_t> next_id_;
  int64_t base_emitted_ = 0;
  int64_t base_drawn_ = 0;
  SimTime clock_ = 0;                 // time of the last base arrival drawn
  std::optional<SimTime> base_next_;  // the pending base arrival
  bool base_done_ = false;
  size_t burst_index_ = 0;  // bursts sorted by time
  int64_t burst_pos_ = 0;   // requests of bursts_[burst_index_] already emitted
};

}  // namespace kvsim
