// Who starts a replica's iterations. By default the replica itself: an iteration starts as soon
// as the last one ended and there is work. A replica given a StepGate instead tells the gate
// that it has work (wake) and lets the gate start its iterations: lockstep data-parallel ranks
// (sim/cluster/lockstep_group.h) start and end every step together, each rank's step lasting the
// slowest rank's.
#pragma once

namespace kvsim {

class StepGate {
 public:
  virtual ~StepGate() = default;
  // The replica has work it could plan now (an arrival, an iteration's end, a restart): the gate
  // starts a step when its own clock allows.
  virtual void wake() = 0;
};

}  // namespace kvsim
