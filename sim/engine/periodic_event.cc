// PeriodicEvent (periodic_event.h).
#include "sim/engine/periodic_event.h"

#include <utility>

#include "core/check.h"

namespace kvsim {

PeriodicEvent::PeriodicEvent(EventQueue& events, SimTime period, std::function<void()> fire)
    : events_(events), period_(period), fire_(std::move(fire)) {
  KVSIM_CHECK(period_ >= 1, "a periodic event every {} ns", period_);
}

void PeriodicEvent::start() { schedule(events_.now()); }

void PeriodicEvent::took_through(SimTime last) {
  KVSIM_CHECK(last >= next_at_ && (last - next_at_) % period_ == 0,
              "periodic occurrences taken through {} from {} every {} ns", last, next_at_, period_);
  events_.cancel(pending_);
  schedule(last + period_);
}

void PeriodicEvent::schedule(SimTime at) {
  next_at_ = at;
  pending_ = events_.schedule_background_at(at, [this] {
    fire_();
    schedule(next_at_ + period_);
  });
}

}  // namespace kvsim
