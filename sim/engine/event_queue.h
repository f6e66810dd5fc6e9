// The discrete-event core: a clock and a priority queue of callbacks. Events pop by (time, class,
// seq): at equal times every normal event runs before every late one (schedule_late), and within a
// class they keep the order they were scheduled in, so a run is a pure function of its inputs.
// Background events (schedule_background: a sampler) run in time order like the others but do not
// keep the queue alive: run() stops, and the clock stays, when only background events are left.
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
  EventId schedule(SimTime delay, std::function<void()> fn) {
    return schedule_at(now_ + delay, std::move(fn));
  }
  // Schedules `fn` after every normal event already due, or later scheduled, at now() + delay:
  // work that must see everything that happens at one instant (an iteration planned at t sees
  // every arrival at t). Late events at one time keep their order.
  EventId schedule_late(SimTime delay, std::function<void()> fn);
  // Schedules an event that does not count in empty(): run() ends when only these are left, so
  // they never move the end of a run.
  EventId schedule_background(SimTime delay, std::function<void()> fn);
  EventId schedule_background_at(SimTime at, std::function<void()> fn);
  // Cancels a pending event; cancelling a fired or unknown id is a no-op.
  void cancel(EventId id);

  SimTime now() const { return now_; }
  // No live event other than background ones.
  bool empty() const { return live_ == 0; }
  // Time of the next live event, or max() when none.
  SimTime next_time();
  // Time of the next live event other than `id` (the periodic sampler's pending one: what a
  // fast-forward that takes samples in line must stop at), or max() when none.
  SimTime next_time_besides(EventId id);
  uint64_t events_processed() const { return processed_; }

  // Pops and runs one live event; false when none is left. Throws InputError when a limit is hit.
  bool step();
  // Runs events while a non-background one is pending and the next one is at or before `end`.
  void run_until(SimTime end);
  void run() { run_until(std::numeric_limits<SimTime>::max()); }

  // A wall-clock hook (--max-wall-s, the progress line): `poll` runs after every
  // kPollEvents-th event (a clock read per event would cost more than the event); when it returns
  // true, run_until() returns with the pending events left unrun and stopped() is true.
  static constexpr uint64_t kPollEvents = 4096;
  void set_poll(std::function<bool()> poll) { poll_ = std::move(poll); }
  bool stopped() const { return stopped_; }

  // Lets a caller that advances time without events (closed-form fast-forward) move the clock.
  // Requires: now() <= t <= next_time().
  void advance_to(SimTime t);

 private:
  enum class Kind : uint8_t { kNormal, kLate, kBackground };
  struct Entry {
    SimTime at;
    bool late;
    uint64_t seq;
    EventId id;
    bool operator>(const Entry& o) const {
      if (at != o.at) return at > o.at;
      if (late != o.late) return late;
      return seq > o.seq;
    }
  };
  EventId push(SimTime at, Kind kind, std::function<void()> fn);
  void drop_cancelled();

  Limits limits_;
  SimTime now_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t processed_ = 0;
  uint64_t live_ = 0;
  std::function<bool()> poll_;
  bool stopped_ = false;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  // Callbacks live in reusable slots, so memory stays bounded by the events pending, not by
  // every event ever scheduled. An id is (generation << 32 | slot); a stale id matches nothing.
  struct Slot {
    std::function<void()> fn;
    uint32_t generation = 0;
    bool background = false;  // not counted in live_
  };
  bool is_live(EventId id) const;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
};

}  // namespace kvsim
