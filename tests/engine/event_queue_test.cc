// The event core: ordering, tie-breaking, cancellation, limits.
#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include "core/errors.h"
#include "sim/engine/event_queue.h"
#include "sim/engine/periodic_event.h"

using namespace kvsim;

TEST_CASE("events pop by time, equal times in schedule order", "[engine]") {
  EventQueue q;
  std::string log;
  q.schedule_at(20, [&] { log += "c"; });
  q.schedule_at(10, [&] { log += "a"; });
  q.schedule_at(10, [&] { log += "b"; });
  q.schedule_at(10, [&] { q.schedule(0, [&] { log += "d"; }); });
  q.run();
  CHECK(log == "abdc");
  CHECK(q.now() == 20);
  CHECK(q.events_processed() == 5);
}

TEST_CASE("late events run after every normal event at their time", "[engine]") {
  EventQueue q;
  std::string log;
  q.schedule_at(10, [&] {
    log += "a";
    q.schedule_late(0, [&] { log += "L"; });
    q.schedule(0, [&] { log += "c"; });  // normal, scheduled after the late one: still first
  });
  q.schedule_at(10, [&] { log += "b"; });
  q.schedule_at(11, [&] { log += "e"; });
  q.run();
  CHECK(log == "abcLe");
}

TEST_CASE("background events never keep the queue alive nor move its end", "[engine]") {
  EventQueue q;
  int samples = 0;
  std::function<void()> sampler = [&] {
    ++samples;
    q.schedule_background(3, sampler);
  };
  q.schedule_background(0, sampler);
  q.schedule_at(7, [] {});
  CHECK(!q.empty());
  q.run();
  CHECK(samples == 3);  // at 0, 3 and 6; the one at 9 stays pending
  CHECK(q.now() == 7);
  CHECK(q.empty());
}

TEST_CASE("a periodic event fires as the rescheduling sampler did, and takes occurrences in line",
          "[engine]") {
  // Every 3 from 0, beside normal events at 7 and 9: fires at 0, 3, 6 and 9, its 9 after the
  // normal event at 9 (that one was scheduled first, the occurrence only when 6 fired).
  EventQueue q;
  std::string log;
  PeriodicEvent p(q, 3, [&] { log += "s" + std::to_string(q.now()) + " "; });
  q.schedule_at(7, [&] { log += "e7 "; });
  q.schedule_at(9, [&] { log += "e9 "; });
  q.schedule_at(10, [] {});
  p.start();
  q.run();
  CHECK(log == "s0 s3 s6 e7 e9 s9 ");
  // In line: at 0 the occurrence at 0 is pending; the next other event is at 7. Taking 0 and 3
  // in line schedules 6 as the one at 3 would have: the events then fire 6, 7.
  EventQueue r;
  log.clear();
  PeriodicEvent p2(r, 3, [&] { log += "s" + std::to_string(r.now()) + " "; });
  r.schedule_at(7, [&] { log += "e7 "; });
  p2.start();
  CHECK(p2.next_at() == 0);
  CHECK(r.next_time() == 0);
  CHECK(r.next_time_besides(p2.pending()) == 7);
  CHECK(r.next_time_besides(12345) == 0);  // another id: the top itself
  p2.took_through(3);
  CHECK(p2.next_at() == 6);
  CHECK(r.next_time() == 6);
  r.run();
  CHECK(log == "s6 e7 ");
}

TEST_CASE("cancelled events never run; stale ids cancel nothing", "[engine]") {
  EventQueue q;
  int fired = 0;
  EventId a = q.schedule_at(5, [&] { fired += 1; });
  q.schedule_at(6, [&] { fired += 10; });
  q.cancel(a);
  q.cancel(a);  // second cancel is a no-op
  q.run();
  CHECK(fired == 10);
  // Slot reuse: the old id must not cancel the new event in the same slot.
  EventId b = q.schedule_at(7, [&] { fired += 100; });
  q.cancel(a);
  q.run();
  CHECK(fired == 110);
  CHECK(b != a);
}

TEST_CASE("limits stop runaway runs with a clear message", "[engine]") {
  EventQueue q(EventQueue::Limits{.max_events = 100});
  std::function<void()> loop = [&] { q.schedule(0, loop); };
  q.schedule(0, loop);
  CHECK_THROWS_WITH(q.run(), Catch::Matchers::Contains("--max-events (100)"));
  EventQueue t(EventQueue::Limits{.max_time = 1000});
  std::function<void()> tick = [&] { t.schedule(300, tick); };
  t.schedule(0, tick);
  CHECK_THROWS_WITH(t.run(), Catch::Matchers::Contains("--max-sim-time"));
}

// advance_to is the clock move of a closed-form fast-forward (no user yet; kept for it, so
// tested): it may move the clock up to the next event, never past it or back.
TEST_CASE("advance_to moves the clock up to the next event, never past it or back", "[engine]") {
  EventQueue q;
  SimTime ran_at = -1;
  q.schedule_at(100, [&] { ran_at = q.now(); });
  q.advance_to(40);
  CHECK(q.now() == 40);
  q.advance_to(100);  // up to the next event's time is allowed
  CHECK(q.now() == 100);
  CHECK_THROWS_AS(q.advance_to(101), InvariantError);  // would skip the pending event
  CHECK_THROWS_AS(q.advance_to(99), InvariantError);   // time never goes back
  q.run();
  CHECK(ran_at == 100);
}
