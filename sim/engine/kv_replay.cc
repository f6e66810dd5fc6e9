#include "sim/engine/kv_replay.h"

#include <algorithm>
#include <deque>
#include <limits>

#include "core/check.h"

namespace kvsim {

namespace {

struct Running {
  size_t index;    // into the request list
  int64_t target;  // tokens when done: prompt + output
};

class Replay {
 public:
  Replay(KvStore& store, const std::vector<ReplayRequest>& requests, const ReplayOptions& o)
      : store_(store), requests_(requests), options_(o) {
    for (size_t i = 0; i < requests.size(); ++i) waiting_.push_back(i);
    result_.requests = static_cast<int64_t>(requests.size());
  }

  ReplayResult run() {
    sample_hold();
    while (!waiting_.empty() || !running_.empty()) {
      admit();
      if (running_.empty()) continue;  // everything left was rejected
      advance();
      finish();
    }
    result_.waste = acc_.summary(t_);
    result_.of_kv_space = space_acc_.summary(t_);
    result_.iterations = t_;
    result_.peak_live_bytes = result_.waste.peak_live_bytes;
    result_.peak_footprint_bytes = result_.waste.peak_footprint_bytes;
    return result_;
  }

 private:
  // Samples the store; `space` gets the Figure 2 view of the same instant (ReplayResult).
  KvSample sample(KvSample& space) {
    const KvUsage u = store_.usage();
    result_.peak_kv_bytes = std::max(result_.peak_kv_bytes, u.held_bytes);
    space.live_bytes = u.live_bytes;
    space.reservation_bytes = u.reservation_bytes;
    space.internal_bytes = u.internal_bytes - u.rounding_bytes;
    space.external_bytes = std::max<int64_t>(
        0, u.capacity_bytes - space.live_bytes - space.reservation_bytes - space.internal_bytes);
    return KvSample::from(u);
  }
  void sample_hold() {
    KvSample space;
    acc_.hold(t_, sample(space));
    space_acc_.hold(t_, space);
  }
  void sample_ramp() {
    KvSample space;
    acc_.ramp(t_, sample(space));
    space_acc_.ramp(t_, space);
  }
  void check() {
    if (options_.check_invariants) store_.check_invariants();
  }

  void count_failure(const AllocResult& r) {
    ++result_.alloc_failures;
    if (r.reason == OomReason::kCapacity) ++result_.oom_capacity;
    if (r.reason == OomReason::kFragmentation) ++result_.oom_fragmentation;
    if (r.reason == OomReason::kTooLong) ++result_.oom_too_long;
  }

  // Admits from the head of the queue until the limit or a failure (which blocks the queue
  // until a running request finishes).
  void admit() {
    if (blocked_) return;
    bool changed = false;
    while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < options_.max_inflight) {
      const size_t i = waiting_.front();
      const ReplayRequest& q = requests_[i];
      const PrefixHashes prefix{q.prefix_hashes, q.hash_block_tokens};
      const auto id = static_cast<RequestId>(i);
      AllocResult r =
          store_.allocate(id, q.prompt_tokens, q.prompt_tokens + q.output_tokens, prefix);
      if (!r) {
        count_failure(r);
        if (r.reason == OomReason::kTooLong || running_.empty()) {
          ++result_.rejected;  // can never fit
          waiting_.pop_front();
          continue;
        }
        blocked_ = true;
        break;
      }
      waiting_.pop_front();
      running_.push_back({i, q.prompt_tokens + q.output_tokens});
      changed = true;
    }
    result_.peak_inflight = std::max(result_.peak_inflight, static_cast<int64_t>(running_.size()));
    if (changed) {
      check();
      sample_hold();
    }
  }

  // Fast-forwards the decode run up to the next allocation or completion, then steps once.
  void advance() {
    int64_t k = std::numeric_limits<int64_t>::max();
    for (const Running& r : running_) {
      const auto id = static_cast<RequestId>(r.index);
      const int64_t left = r.target - store_.tokens(id);
      k = std::min({k, left, store_.tokens_until_growth_allocates(id)});
    }
    if (k > 0) {
      for (const Running& r : running_) {
        const auto id = static_cast<RequestId>(r.index);
        AllocResult res = store_.grow(id, store_.tokens(id) + k);
        KVSIM_CHECK(res.ok, "grow inside the slack of request {} failed", r.index);
      }
      t_ += k;
      sample_ramp();
      check();
      return;
    }
    // One iteration in which at least one request allocates.
    ++result_.events;
    ++t_;
    std::vector<Running> kept;
    kept.reserve(running_.size());
    std::vector<size_t> preempted;
    for (const Running& r : running_) {
      const auto id = static_cast<RequestId>(r.index);
      if (store_.tokens(id) >= r.target) {
        kept.push_back(r);
        continue;
      }
      AllocResult res = store_.grow(id, store_.tokens(id) + 1);
      if (res) {
        kept.push_back(r);
        continue;
      }
      count_failure(res);
      store_.release(id);
      preempted.push_back(r.index);
    }
    if (!preempted.empty() && kept.empty() && preempted.size() == 1) {
      // Alone and still out of room: it can never finish.
      ++result_.rejected;
    } else {
      result_.preemptions += static_cast<int64_t>(preempted.size());
      // Back to the front of the queue, in their original order.
      for (auto it = preempted.rbegin(); it != preempted.rend(); ++it) waiting_.push_front(*it);
      if (!preempted.empty()) blocked_ = !kept.empty();
    }
    running_ = std::move(kept);
    sample_ramp();
    check();
  }

  void finish() {
    bool changed = false;
    std::vector<Running> kept;
    kept.reserve(running_.size());
    for (const Running& r : running_) {
      const auto id = static_cast<RequestId>(r.index);
      if (store_.tokens(id) >= r.target) {
        store_.release(id);
        ++result_.completed;
        changed = true;
      } else {
        kept.push_back(r);
      }
    }
    running_ = std::move(kept);
    if (changed) {
      blocked_ = false;
      check();
      sample_hold();
    }
  }

  KvStore& store_;
  const std::vector<ReplayRequest>& requests_;
  ReplayOptions options_;
  std::deque<size_t> waiting_;
  std::vector<Running> running_;
  bool blocked_ = false;
  SimTime t_ = 0;
  KvWasteAccumulator acc_;
  KvWasteAccumulator space_acc_;  // the Figure 2 view
  ReplayResult result_;
};

}  // namespace

ReplayResult replay_kv(KvStore& store, const std::vector<ReplayRequest>& requests,
                       const ReplayOptions& options) {
  KVSIM_CHECK(store.usage().requests == 0, "replay_kv needs an empty store");
  KVSIM_CHECK(options.max_inflight >= 1, "max_inflight {} < 1", options.max_inflight);
  for (const ReplayRequest& q : requests) {
    KVSIM_CHECK(q.prompt_tokens >= 1 && q.output_tokens >= 1,
                "request with {} prompt and {} "
                "output tokens",
                q.prompt_tokens, q.output_tokens);
  }
  return Replay(store, requests, options).run();
}

}  // namespace kvsim
