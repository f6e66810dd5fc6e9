// FastForward: a replica's decode-only periods in closed form (docs/fast-forward.md), the one
// interface of this folder, with the two things a replica gives it: the rules for when it may
// run (fast_forward_eligible) and FastForward::Host, the replica's side of the seam, which
// the replica implements. A replica in fast-forward mode owns one; while it exists the
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

#include "core/int128.h"
#include "core/sim_time.h"
#include "sim/serving/scheduler.h"

namespace kvsim {

class AggregateDecodes;
struct DecodeStepFixed;
struct EngineConfig;
class EventQueue;
class GpuMemoryPool;
class KvLedger;
class KvStore;
struct MemorySnapshot;
class PeriodicEvent;
class Recorder;
class RunQueues;
struct RequestState;

// Whether a replica of `config`, with `scheduler` and `kv` (its pool's store; asked, not changed),
// may run its decode-only periods in closed form at all: each rule names what the closed form
// cannot model. (Checking mode, an observer of every iteration or a clock turn it off at run time:
// Replica::update_fast_forward.)
bool fast_forward_eligible(const EngineConfig& config, const Scheduler& scheduler, KvStore& kv,
                           bool walk_may_end_early);

class FastForward {
 public:
  // The replica as a stretch reaches it: the parts it works on, and the replica's own state and
  // step functions, which a stretch calls as stepping does (start_iteration, end_iteration).
  class Host {
   public:
    struct Parts {
      GpuMemoryPool& pool;
      EventQueue& events;
      RunQueues& queues;
      KvLedger& ledger;
      Recorder& recorder;
    };
    virtual Parts stretch_parts() = 0;
    // Whether the next iteration may be a stretch's as far as the replica knows: none in flight,
    // the replica up with no planning kicked, no request in the guards' admission queue, and
    // (async scheduling) none finished and waiting for the next plan.
    virtual bool stretch_may_start() const = 0;
    // The replica's scheduler's Scheduler::admits_nothing over `view` with the replica's limits.
    virtual bool plans_admit_nothing(const QueueView& view, int64_t decoding,
                                     int64_t walk_frees) const = 0;
    // Whether admission runs guards (their scheduler-side checks may hold a waiting request).
    virtual bool guarded() const = 0;
    // Async scheduling: a step's completions finish after the next plan, an ordinary iteration.
    virtual bool plans_ahead() const = 0;
    // The timeseries sampler, or null.
    virtual PeriodicEvent* stretch_sampler() const = 0;
    // The replica's decode-only step of `seqs` sequences (Replica::decode_step_fixed).
    virtual DecodeStepFixed stretch_step(int64_t seqs, int block_tokens) const = 0;
    // The step functions (Replica's record_start, hand_over, close_iteration, complete,
    // sample_at), and the start of the step that just ended (async scheduling's cutoff).
    virtual void stretch_record_start(SimTime t, const MemorySnapshot& start, int64_t seqs,
                                      int64_t tokens, SimTime duration, Int128 flops) = 0;
    virtual void stretch_hand_over(IterationPlan& plan, SimTime duration) = 0;
    virtual void stretch_step_started(SimTime t) = 0;
    virtual void stretch_close_iteration() = 0;
    virtual void stretch_complete(const std::vector<int64_t>& done) = 0;
    virtual void stretch_sample_at(SimTime t, const MemorySnapshot& s) = 0;

   protected:
    ~Host() = default;
  };

  // Sets the host's queues' decoding set to the decode aggregate (they hold no request yet).
  // The host must outlive it.
  explicit FastForward(Host& host);
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
  // The stretch's quiet steps from `t` on, all at once; moves `t` past them. Returns how many
  // ran (0: none; the stretch's next step runs one by one). When it took samples in line,
  // `horizon` moves to the next pending event.
  int64_t quiet(SimTime& t, SimTime& horizon, const DecodeStepFixed& step);

  Host& host_;
  Host::Parts parts_;
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
