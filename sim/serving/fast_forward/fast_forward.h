// FastForward: a replica's decode-only periods in closed form (docs/fast-forward.md), the one
// interface of this folder. A replica in fast-forward mode owns one; while it exists the
// replica's queues keep their decoding requests in the decode aggregate (AggregateDecodes), and
// after every iteration the replica calls run(), which runs the decode-only iterations that
// would follow before anything else happens and leaves the clock at the end of the last one.
// Each step is made of the replica's own step functions (Replica::record_start, hand_over,
// close_iteration, complete) and the decoding set's plan and commit, as stepping's are: the
// same calls in the same order (stretch.cc).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/sim_time.h"
#include "sim/serving/scheduler.h"

namespace kvsim {

class AggregateDecodes;
struct DecodeStepFixed;
class Replica;
struct RequestState;

class FastForward {
 public:
  // Sets `replica`'s queues' decoding set to the decode aggregate (they hold no request yet).
  // The replica must outlive it.
  explicit FastForward(Replica& replica);
  ~FastForward();
  FastForward(const FastForward&) = delete;
  FastForward& operator=(const FastForward&) = delete;

  // Right after an iteration ended: the stretches that follow, none when the next iteration is
  // not a decode-only one with nothing admissible and no event due first.
  void run();

 private:
  // One stretch; true when it ended with a step that completed requests (another may follow).
  bool stretch();
  // Whether, as the scheduler says (Scheduler::admits_nothing), no plan of a stretch with
  // `decoding` decoding requests can admit or continue a prefill (`walk_frees`: blocks its decode
  // walk frees).
  bool admits_nothing(int64_t decoding, int64_t walk_frees) const;
  bool due_frees_keep_blocked(const std::vector<RequestState*>& due) const;
  // Whether a decode's growth may free blocks: a sliding window on every layer, or local layers
  // (a hybrid model's sliding or chunked KV cache groups).
  bool growth_frees_blocks() const;
  // The stretch's quiet steps from `t` on, all at once; moves `t` past them. Returns how many
  // ran (0: none; the stretch's next step runs one by one). When it took samples in line,
  // `horizon` moves to the next pending event.
  int64_t quiet(SimTime& t, SimTime& horizon, const DecodeStepFixed& step);

  Replica& r_;
  AggregateDecodes* aggregate_;  // the queues' decoding set, owned by them
  // Per-stretch scratch, reused.
  std::vector<RequestState*> due_members_;  // the aggregate's due members of a step
  IterationPlan plan_;                      // the aggregate's plan of a step
  std::vector<int64_t> done_;               // a completing step's completions
  std::vector<int64_t> crossed_in_period_;  // a quiet run's blocks crossed, one period
  std::vector<int64_t> swapped_in_period_;  // of those, swapped (sliding windows)
  std::vector<SimTime> run_ends_;           // its steps' ends (DecodeRun::plan_steps)
  std::vector<std::pair<SimTime, int64_t>> run_samples_;  // its samples in line: (time, step)
};

}  // namespace kvsim
