// Lockstep data-parallel ranks of a mixture-of-experts model, as vLLM V1 runs them
// (docs/cluster.md "Lockstep data parallelism"; vllm/v1/engine/core.py DPEngineCoreProc). Every
// rank keeps its own scheduler and KV pool, but their expert layers exchange tokens in every
// forward, so the ranks step together:
//   - a step starts on every rank at once; a rank with nothing scheduled runs a dummy forward
//     (execute_dummy_batch), and the step lasts the slowest rank's forward;
//   - with CUDA graphs on, every rank pads its batch to the largest rank's token count when all
//     of them are within the capture range (vllm/v1/worker/dp_utils.py
//     coordinate_batch_across_dp), plus `sync` for the all-reduce of the batch metadata;
//   - the group looks for work anywhere only every 32nd step (_has_global_unfinished_reqs): after
//     the last request finishes the ranks keep running dummy steps until then; then the wave
//     ends, and the next request starts a new one with the step count at 0.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/engine/event_queue.h"
#include "sim/serving/replica.h"
#include "sim/serving/step_gate.h"

namespace kvsim {

struct LockstepOptions {
  // Pad every rank's batch to the group's largest token count when CUDA graphs run it: on, and
  // every rank's batch within the graphs' largest capture size (dp_utils.py: should_dp_pad when
  // the CUDA-graph mode agreed over the ranks, their minimum, is not NONE; a batch above the
  // largest capture size runs eager).
  bool cuda_graphs = true;
  int64_t graph_max_tokens = 512;
  SimTime sync = 0;      // the per-step DP all-reduce of the batch metadata
  int check_every = 32;  // steps between the group's checks for unfinished work anywhere
};

// What the group did (tests and the run's figures).
struct LockstepStats {
  int64_t steps = 0;           // group steps
  int64_t dummy_forwards = 0;  // rank-steps with nothing scheduled (execute_dummy_batch)
  int64_t waves = 0;           // waves started
};

class LockstepGroup final : public StepGate {
 public:
  // The ranks are borrowed; the group gates them (Replica::set_step_gate) from here on.
  LockstepGroup(EventQueue& events, std::vector<Replica*> ranks, LockstepOptions options);
  ~LockstepGroup() override;

  void wake() override;
  const LockstepStats& stats() const { return stats_; }
  bool running() const { return running_; }  // in a wave

 private:
  void start_step();  // every event due now has run (a late event)
  void end_step();
  bool any_unfinished() const;

  EventQueue& events_;
  std::vector<Replica*> ranks_;
  LockstepOptions options_;
  LockstepStats stats_;
  std::vector<char> planned_;  // per rank, this step: a real batch (else a dummy)
  bool running_ = false;       // in a wave: steps go on whether or not a rank has work
  bool busy_ = false;          // a step in flight
  bool start_pending_ = false;
  int64_t step_counter_ = 0;  // steps in this wave (vLLM's step_counter)
};

}  // namespace kvsim
