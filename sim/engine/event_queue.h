// The discrete-event core: a clock and a priority queue of callbacks. Events pop by (time, seq):
// equal times keep the order they were scheduled in, so a run is a pure function of its inputs.
// Cancellation is lazy (flagged, skipped when popped). Limits turn a runaway scenario into a
// clear error instead of a hang.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <vector>

#include "core/sim_time.h"

namespace kvsim {

using EventId = uint64_t;

class EventQueue {
 public:
  struct Limits {
    uint64_t max_events = std::numeric_limits<uint64_t>::max();
    SimTime max_time = std::numeric_limits<SimTime>::max();
  };

  EventQueue() = default;
  explicit EventQueue(Limits limits) : limits_(limits) {}

  // Schedules `fn` at absolute time `at`. Requires: at >= now().
  EventId schedule_at(SimTime at, std::function<void()> fn);
  EventId schedule(SimTime delay, std::function<void()> fn) { return schedule_at(now_ + delay, std::move(fn)); }
  // Cancels a pending event; cancelling a fired or unknown id is a no-op.
  void cancel(EventId id);

  SimTime now() const { return now_; }
  bool empty() const { return live_ == 0; }
  // Time of the next live event, or max() when none.
  SimTime next_time();
  uint64_t events_processed() const { return processed_; }

  // Pops and runs one live event; false when none is left. Throws InputError when a limit is hit.
  bool step();
  // Runs events while the next one is at or before `end`.
  void run_until(SimTime end);
  void run() { run_until(std::numeric_limits<SimTime>::max()); }

  // Lets a caller that advances time without events (closed-form fast-forward) move the clock.
  // Requires: now() <= t <= next_time().
  void advance_to(SimTime t);

 private:
  struct Entry {
    SimTime at;
    uint64_t seq;
    EventId id;
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  void drop_cancelled();

  Limits limits_;
  SimTime now_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t processed_ = 0;
  uint64_t live_ = 0;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  // Callbacks live in reusable slots, so memory stays bounded by the events pending, not by
  // every event ever scheduled. An id is (generation << 32 | slot); a stale id matches nothing.
  struct Slot {
    std::function<void()> fn;
    uint32_t generation = 0;
  };
  bool is_live(EventId id) const;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
};

}  // namespace kvsim
