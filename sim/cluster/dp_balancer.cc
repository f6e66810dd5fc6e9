// vLLM's data-parallel load balancer (vllm/v1/engine/core_client.py,
// DPLBAsyncMPClient.get_core_engine_for_request): the front end of one `vllm serve
// --data-parallel-size d` sends each request to the engine with the lowest 4 x waiting + running,
// from the counts the engines last published through the DP coordinator
// (vllm/v1/engine/coordinator.py: forwarded at most every 100 ms while they change). The scan
// starts at the front end's start index (0 for a single API server) and the first minimum wins;
// the chosen engine's waiting count is then bumped by the number of front ends (1) in the
// router's own copy, so that requests arriving between two publishes spread out. Requests never
// move once sent.
#include <limits>
#include <vector>

#include "sim/cluster/router.h"

namespace kvsim {

namespace {

class DpBalanceRouter final : public Router {
 public:
  explicit DpBalanceRouter(SimTime interval) : interval_(interval) {}

  int route(const RequestSpec&, std::span<const ReplicaView> replicas) override {
    fit(replicas.size());
    int best = -1;
    int64_t min_score = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < replicas.size(); ++i) {  // start index 0: one front end
      if (!replicas[i].up) continue;
      const int64_t score = kWaitingWeight * counts_[i].waiting + counts_[i].running;
      if (score < min_score) {  // strictly less: the first minimum wins
        min_score = score;
        best = static_cast<int>(i);
      }
    }
    if (best >= 0) counts_[best].waiting += kFrontEnds;
    return best;
  }

  SimTime stats_interval() const override { return interval_; }

  void on_stats(std::span<const ReplicaView> replicas) override {
    fit(replicas.size());
    for (size_t i = 0; i < replicas.size(); ++i) {
      counts_[i] = {.waiting = replicas[i].waiting, .running = replicas[i].running};
    }
  }

 private:
  static constexpr int64_t kWaitingWeight = 4;  // score = waiting * 4 + running
  static constexpr int64_t kFrontEnds = 1;      // the client count the chosen engine is bumped by
  struct Counts {
    int64_t waiting = 0;
    int64_t running = 0;
  };
  // Before the first publish every engine counts as empty, as vLLM's lb_engines starts.
  void fit(size_t n) {
    if (counts_.size() != n) counts_.resize(n);
  }

  SimTime interval_;
  std::vector<Counts> counts_;
};

}  // namespace

std::unique_ptr<Router> make_dp_balance_router(const ConfigNode& node, const RouterContext&) {
  const double ms = node.get<double>("stats_interval_ms", 100, {.min = 0.001, .max = 1e7});
  return std::make_unique<DpBalanceRouter>(seconds_to_sim(ms * 1e-3));
}

}  // namespace kvsim
