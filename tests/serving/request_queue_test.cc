// The scheduling policies' queue classes (sim/serving/request_queue.h), by hand: where a request
// joins and which running request is preempted, for each policy.
#include <catch2/catch.hpp>

#include <vector>

#include "sim/serving/request_queue.h"

using namespace kvsim;

namespace {

// Requests 0..4: (priority, arrival ns, prompt tokens).
RequestQueue::Requests queue_test_requests() {
  const struct {
    int64_t priority;
    SimTime arrival;
    int64_t prompt;
  } rows[] = {{2, 0, 900}, {1, 10, 300}, {2, 20, 100}, {1, 10, 300}, {0, 30, 900}};
  RequestQueue::Requests requests;
  for (int64_t id = 0; id < 5; ++id) {
    RequestState r;
    r.spec.id = id;
    r.spec.priority = rows[id].priority;
    r.spec.arrival = rows[id].arrival;
    r.prompt_tokens = rows[id].prompt;
    requests.emplace(id, r);
  }
  return requests;
}

std::vector<int64_t> queue_order(const RequestQueue& q) { return {q.begin(), q.end()}; }

}  // namespace

TEST_CASE("fcfs queues in arrival order, puts a preempted request first, preempts the newest",
          "[engine][scheduling]") {
  RequestQueue::Requests requests = queue_test_requests();
  auto q = make_request_queue(EngineConfig::SchedulingPolicy::kFcfs, requests);
  for (int64_t id : {0, 1, 2}) q->add(id, false);
  q->add(4, true);  // preempted: back at the front
  CHECK(queue_order(*q) == std::vector<int64_t>{4, 0, 1, 2});
  std::vector<RequestState*> running{&requests.at(3), &requests.at(0), &requests.at(2)};
  CHECK(q->preemption_victim(running) == &requests.at(2));  // the last to join the batch
  CHECK_FALSE(q->walk_ends_at_self_preemption());
  q->erase(0);
  q->erase(7);  // not queued: nothing happens
  CHECK(queue_order(*q) == std::vector<int64_t>{4, 1, 2});
}

TEST_CASE("priority queues by (priority, arrival, id) and preempts the largest (priority, arrival)",
          "[engine][scheduling]") {
  RequestQueue::Requests requests = queue_test_requests();
  auto q = make_request_queue(EngineConfig::SchedulingPolicy::kPriority, requests);
  // Keys: 0 (2,0,0), 1 (1,10,1), 2 (2,20,2), 3 (1,10,3), 4 (0,30,4). A preempted request goes to
  // its place by key, not to the front.
  for (int64_t id : {2, 0, 3}) q->add(id, false);
  q->add(1, true);
  q->add(4, false);
  CHECK(queue_order(*q) == std::vector<int64_t>{4, 1, 3, 0, 2});
  // Running in the order 2, 0, 1: (2,20) is the largest; with 2 gone, (2,0) of request 0.
  std::vector<RequestState*> running{&requests.at(2), &requests.at(0), &requests.at(1)};
  CHECK(q->preemption_victim(running) == &requests.at(2));
  running = {&requests.at(1), &requests.at(0)};
  CHECK(q->preemption_victim(running) == &requests.at(0));
  // Exact ties (1 and 3 share (1, 10)): the first in running order, as Python's max keeps it.
  running = {&requests.at(3), &requests.at(1)};
  CHECK(q->preemption_victim(running) == &requests.at(3));
  CHECK(q->walk_ends_at_self_preemption());
}

TEST_CASE("shortest_prompt_first queues by (prompt tokens, arrival, id), preempts the newest",
          "[engine][scheduling]") {
  RequestQueue::Requests requests = queue_test_requests();
  auto q = make_request_queue(EngineConfig::SchedulingPolicy::kShortestPromptFirst, requests);
  // Keys: 0 (900,0,0), 1 (300,10,1), 2 (100,20,2), 3 (300,10,3), 4 (900,30,4).
  for (int64_t id : {4, 3, 0, 1, 2}) q->add(id, false);
  CHECK(queue_order(*q) == std::vector<int64_t>{2, 1, 3, 0, 4});
  std::vector<RequestState*> running{&requests.at(2), &requests.at(4)};
  CHECK(q->preemption_victim(running) == &requests.at(4));
  CHECK_FALSE(q->walk_ends_at_self_preemption());
}
