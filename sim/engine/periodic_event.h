// PeriodicEvent: a background event (EventQueue::schedule_background: it never keeps a run
// going) at start, start + period, start + 2·period, ...: the timeseries sampler
// (sim/run/scenario_runner.cc). Each occurrence schedules the next as it fires, so the next one's
// place among the events of its instant is the one an event scheduled then gets.
//
// A replica's fast-forward that knows nothing else happens before some occurrences may fire them
// in line, at the times they fall in its steps (FastForward::quiet,
// sim/serving/fast_forward/stretch.cc), and then say so (took_through): the occurrence after the
// last one taken is scheduled then, as that one's firing would have scheduled it; nothing else was
// scheduled between in either case.
#pragma once

#include <functional>

#include "core/sim_time.h"
#include "sim/engine/event_queue.h"

namespace kvsim {

class PeriodicEvent {
 public:
  // Requires: period >= 1. `fire` runs at each occurrence (events.now() is its time).
  PeriodicEvent(EventQueue& events, SimTime period, std::function<void()> fire);
  PeriodicEvent(const PeriodicEvent&) = delete;
  PeriodicEvent& operator=(const PeriodicEvent&) = delete;

  // The first occurrence, now.
  void start();
  SimTime period() const { return period_; }
  // The pending occurrence: its time and its event.
  SimTime next_at() const { return next_at_; }
  EventId pending() const { return pending_; }
  // The occurrences from next_at() through `last` were fired in line by the caller: the pending
  // one is cancelled and the one after `last` scheduled.
  void took_through(SimTime last);

 private:
  void schedule(SimTime at);

  EventQueue& events_;
  SimTime period_;
  std::function<void()> fire_;
  SimTime next_at_ = 0;
  EventId pending_ = 0;
};

}  // namespace kvsim
