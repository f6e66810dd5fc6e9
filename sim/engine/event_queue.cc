#include "sim/engine/event_queue.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/errors.h"

namespace kvsim {

EventId EventQueue::schedule_at(SimTime at, std::function<void()> fn) {
  return push(at, Kind::kNormal, std::move(fn));
}

EventId EventQueue::schedule_late(SimTime delay, std::function<void()> fn) {
  return push(now_ + delay, Kind::kLate, std::move(fn));
}

EventId EventQueue::schedule_background(SimTime delay, std::function<void()> fn) {
  return schedule_background_at(now_ + delay, std::move(fn));
}

EventId EventQueue::schedule_background_at(SimTime at, std::function<void()> fn) {
  return push(at, Kind::kBackground, std::move(fn));
}

EventId EventQueue::push(SimTime at, Kind kind, std::function<void()> fn) {
  KVSIM_CHECK(at >= now_, "event scheduled in the past: at={} now={}", at, now_);
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  slots_[slot].fn = std::move(fn);
  slots_[slot].background = kind == Kind::kBackground;
  const EventId id = (EventId{slots_[slot].generation} << 32) | slot;
  heap_.push(Entry{at, kind == Kind::kLate, next_seq_++, id});
  if (kind != Kind::kBackground) ++live_;
  return id;
}

bool EventQueue::is_live(EventId id) const {
  const auto slot = static_cast<uint32_t>(id & 0xffffffffu);
  return slot < slots_.size() && slots_[slot].generation == static_cast<uint32_t>(id >> 32) &&
         slots_[slot].fn;
}

void EventQueue::cancel(EventId id) {
  if (!is_live(id)) return;
  const auto slot = static_cast<uint32_t>(id & 0xffffffffu);
  slots_[slot].fn = nullptr;
  ++slots_[slot].generation;
  free_slots_.push_back(slot);
  if (!slots_[slot].background) --live_;
}

void EventQueue::drop_cancelled() {
  while (!heap_.empty() && !is_live(heap_.top().id)) heap_.pop();
}

SimTime EventQueue::next_time() {
  drop_cancelled();
  return heap_.empty() ? std::numeric_limits<SimTime>::max() : heap_.top().at;
}

SimTime EventQueue::next_time_besides(EventId id) {
  drop_cancelled();
  if (heap_.empty()) return std::numeric_limits<SimTime>::max();
  if (heap_.top().id != id) return heap_.top().at;
  // Below the top: set it aside and put it back (the same entry, so the same order).
  const Entry top = heap_.top();
  heap_.pop();
  drop_cancelled();
  const SimTime t = heap_.empty() ? std::numeric_limits<SimTime>::max() : heap_.top().at;
  heap_.push(top);
  return t;
}

bool EventQueue::step() {
  drop_cancelled();
  if (heap_.empty()) return false;
  const Entry e = heap_.top();
  heap_.pop();
  if (e.at > limits_.max_time) {
    throw InputError(fmt::format(
        "run stopped: simulated time passed --max-sim-time ({:.3f} s); the scenario may never "
        "finish (raise the limit if it is meant to run that long)",
        sim_to_seconds(limits_.max_time)));
  }
  if (++processed_ > limits_.max_events) {
    throw InputError(fmt::format(
        "run stopped after --max-events ({}) events at t={:.3f} s; the scenario may be making no "
        "progress (raise the limit if it is meant to be that large)",
        limits_.max_events, sim_to_seconds(e.at)));
  }
  now_ = e.at;
  const auto slot = static_cast<uint32_t>(e.id & 0xffffffffu);
  std::function<void()> fn = std::move(slots_[slot].fn);
  slots_[slot].fn = nullptr;
  ++slots_[slot].generation;
  free_slots_.push_back(slot);
  if (!slots_[slot].background) --live_;
  fn();
  if (poll_ && processed_ % kPollEvents == 0 && poll_()) stopped_ = true;
  return true;
}

void EventQueue::run_until(SimTime end) {
  while (!stopped_ && !empty() && next_time() <= end) step();
}

void EventQueue::advance_to(SimTime t) {
  KVSIM_CHECK(t >= now_ && t <= next_time(), "advance_to({}) outside [{}, next event]", t, now_);
  now_ = t;
}

}  // namespace kvsim
