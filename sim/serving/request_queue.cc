#include "sim/serving/request_queue.h"

#include <algorithm>
#include <tuple>

namespace kvsim {

namespace {

class FcfsQueue final : public RequestQueue {
 public:
  void add(int64_t id, bool preempted) override {
    if (preempted) {
      ids_.push_front(id);
    } else {
      ids_.push_back(id);
    }
  }
};

// A queue kept sorted by (key, arrival, id); a request put back goes to its place by that key.
class OrderedQueue : public RequestQueue {
 public:
  explicit OrderedQueue(const Requests& requests) : requests_(requests) {}
  void add(int64_t id, bool) override {
    const auto key = [this](int64_t i) {
      const RequestState& r = requests_.at(i);
      return std::tuple(order_key(r), r.spec.arrival, r.spec.id);
    };
    const auto mine = key(id);
    const auto at = std::upper_bound(ids_.begin(), ids_.end(), id,
                                     [&](int64_t, int64_t other) { return mine < key(other); });
    ids_.insert(at, id);
  }

 protected:
  virtual int64_t order_key(const RequestState& r) const = 0;

 private:
  const Requests& requests_;
};

class PriorityQueue final : public OrderedQueue {
 public:
  using OrderedQueue::OrderedQueue;
  // The largest (priority, arrival), the first in running order among exact ties (vLLM V1:
  // max(self.running, key=lambda r: (r.priority, r.arrival_time)); max_element also keeps the
  // first of equal maxima).
  RequestState* preemption_victim(const std::vector<RequestState*>& running) const override {
    return *std::max_element(running.begin(), running.end(),
                             [](const RequestState* a, const RequestState* b) {
                               return std::tuple(a->spec.priority, a->spec.arrival) <
                                      std::tuple(b->spec.priority, b->spec.arrival);
                             });
  }
  bool walk_ends_at_self_preemption() const override { return true; }

 private:
  int64_t order_key(const RequestState& r) const override { return r.spec.priority; }
};

class ShortestPromptFirstQueue final : public OrderedQueue {
 public:
  using OrderedQueue::OrderedQueue;

 private:
  int64_t order_key(const RequestState& r) const override { return r.prompt_tokens; }
};

}  // namespace

RequestState* RequestQueue::preemption_victim(const std::vector<RequestState*>& running) const {
  return running.back();
}

void RequestQueue::erase(int64_t id) {
  if (auto it = std::find(ids_.begin(), ids_.end(), id); it != ids_.end()) ids_.erase(it);
}

std::unique_ptr<RequestQueue> make_request_queue(EngineConfig::SchedulingPolicy policy,
                                                 const RequestQueue::Requests& requests) {
  switch (policy) {
    case EngineConfig::SchedulingPolicy::kFcfs: return std::make_unique<FcfsQueue>();
    case EngineConfig::SchedulingPolicy::kPriority:
      return std::make_unique<PriorityQueue>(requests);
    case EngineConfig::SchedulingPolicy::kShortestPromptFirst:
      return std::make_unique<ShortestPromptFirstQueue>(requests);
  }
  return std::make_unique<FcfsQueue>();
}

}  // namespace kvsim
