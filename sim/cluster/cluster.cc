#include "sim/cluster/cluster.h"

#include <algorithm>

#include "core/check.h"

namespace kvsim {

Cluster::Cluster(EventQueue& events, std::unique_ptr<Router> router, Recorder& totals)
    : events_(events), router_(std::move(router)), totals_(totals) {
  KVSIM_CHECK(router_ != nullptr, "a cluster needs a router");
  stats_interval_ = router_->stats_interval();
}

const LockstepGroup& Cluster::add_lockstep_group(const std::vector<size_t>& ranks,
                                                 LockstepOptions options) {
  std::vector<Replica*> replicas;
  for (const size_t i : ranks) {
    KVSIM_CHECK(i < members_.size(), "lockstep rank {} of {} replicas", i, members_.size());
    replicas.push_back(members_[i]->replica.get());
  }
  lockstep_.push_back(std::make_unique<LockstepGroup>(events_, std::move(replicas), options));
  return *lockstep_.back();
}

void Cluster::stats_changed() {
  if (stats_interval_ <= 0 || publish_pending_) return;
  publish_pending_ = true;
  const SimTime at =
      last_publish_ < 0 ? events_.now() : std::max(events_.now(), last_publish_ + stats_interval_);
  // Background: publishing alone never keeps a run going.
  events_.schedule_background_at(at, [this] { publish_stats(); });
}

void Cluster::publish_stats() {
  publish_pending_ = false;
  last_publish_ = events_.now();
  int64_t in_flight = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    const Replica& r = *members_[i]->replica;
    views_[i].waiting = r.waiting();
    views_[i].running = r.running();
    views_[i].up = !r.down() && members_[i]->role != ReplicaRole::kDecode;
    in_flight += members_[i]->outstanding;
  }
  router_->on_stats(views_);
  // Requests in flight change the counts at nearly every step: the next publish is due.
  if (in_flight > 0) stats_changed();
}

Replica& Cluster::add_replica(std::string label, GpuMemoryPool& pool, const LatencyModel& latency,
                              EngineConfig config, std::vector<std::unique_ptr<Guard>> guards,
                              Recorder& recorder, int64_t kv_pool_bytes, ReplicaRole role) {
  auto m = std::make_unique<Member>();
  m->label = std::move(label);
  m->replica = std::make_unique<Replica>(events_, pool, latency, std::move(config),
                                         std::move(guards), recorder);
  m->kv_pool_bytes = static_cast<double>(kv_pool_bytes);
  m->role = role;
  Member* member = m.get();
  const size_t index = members_.size();
  m->replica->set_on_finished([this, member, index](const RequestState& r) {
    --member->outstanding;
    if (r.prefill_only) {
      hand_off(r, index);
      return;
    }
    // It ended on its decode replica before its KV arrived (that replica crashed): the prefill
    // replica's copy is not needed any more.
    if (transfers_.count(r.spec.id)) {
      const Handoff h = forget(r.spec.id);
      members_[h.from]->replica->release_handed_off(r.spec.id);
    }
    if (on_finished_) on_finished_(r);
  });
  m->replica->set_transfer_hooks({.pulled = [this](int64_t id) { pulled(id); },
                                  .abandoned = [this](int64_t id) { abandoned(id); },
                                  .dropped = [this](int64_t id) { dropped(id); }});
  if (router_->wants_kv_events()) {
    member->replica->set_kv_event_sink(
        [this, index](const KvBlockEvent& e) { router_->on_kv_event(static_cast<int>(index), e); });
  }
  members_.push_back(std::move(m));
  views_.resize(members_.size());
  return *member->replica;
}

void Cluster::arrive(const RequestSpec& spec) {
  for (size_t i = 0; i < members_.size(); ++i) {
    const Member& m = *members_[i];
    ReplicaView& v = views_[i];
    v.outstanding = m.outstanding;
    v.up = !m.replica->down() && m.role != ReplicaRole::kDecode;  // arrivals go to prefill-capable
    const double held = static_cast<double>(m.replica->pool().kv().usage().held_bytes);
    v.kv_usage = m.kv_pool_bytes > 0 ? held / m.kv_pool_bytes : 0.0;
  }
  const int i = router_->route(spec, views_);
  if (i < 0) {  // every replica is restarting: the load balancer answers 503
    totals_.on_arrival(events_.now());
    RequestState r;
    r.spec = spec;
    r.prompt_tokens = spec.prompt_tokens;
    r.phase = Phase::kDone;
    r.outcome = Outcome::kFailedUnavailable;
    r.finished_at = events_.now();
    totals_.on_outcome(r, "none");
    if (on_finished_) on_finished_(r);
    return;
  }
  KVSIM_CHECK(static_cast<size_t>(i) < members_.size() && views_[i].up,
              "router chose replica {}, which is not up", i);
  Member& m = *members_[i];
  ++m.outstanding;  // before arrive(): it may finish the request at once
  stats_changed();  // (scheduled first: it publishes the engine's counts before its next step)
  if (m.role == ReplicaRole::kPrefill) {
    handed_.emplace(spec.id, spec);
    m.replica->arrive_prefill_only(spec);
  } else {
    m.replica->arrive(spec);
  }
}

void Cluster::hand_off(const RequestState& r, size_t from) {
  auto f = handed_.find(r.spec.id);
  KVSIM_CHECK(f != handed_.end(), "request {} handed off twice", r.spec.id);
  RequestState state = r;
  state.spec = f->second;
  state.prefill_only = false;
  handed_.erase(f);
  const bool served = r.outcome == Outcome::kCompleted || r.outcome == Outcome::kCompletedTruncated;
  if (!served) {  // it failed on the prefill side: that is its outcome
    state.truncated = r.truncated;
    totals_.on_outcome(state, members_[from]->label);
    if (on_finished_) on_finished_(state);
    return;
  }
  // Served: its KV stays on the prefill replica (kHandingOff) until the transfer ends.
  Replica& source = *members_[from]->replica;
  // The decode side: the up decode-capable replica with the fewest outstanding requests (ties:
  // the lowest index), as DistServe's and Splitwise's least-loaded choice.
  int best = -1;
  for (size_t i = 0; i < members_.size(); ++i) {
    const Member& m = *members_[i];
    if (m.role == ReplicaRole::kPrefill || m.replica->down()) continue;
    if (best < 0 || m.outstanding < members_[best]->outstanding) best = static_cast<int>(i);
  }
  if (best < 0) {
    source.release_handed_off(r.spec.id);
    state.phase = Phase::kDone;
    state.outcome = Outcome::kFailedUnavailable;
    state.finished_at = events_.now();
    totals_.on_outcome(state, "none");
    if (on_finished_) on_finished_(state);
    return;
  }
  Member& to = *members_[best];
  ++to.outstanding;
  state.outcome = Outcome::kNone;
  state.phase = Phase::kGuardQueue;
  if (state.generated >= state.spec.output_tokens) {
    // A one-token answer: nothing to decode, nothing to move; it ends on the decode side at once.
    source.release_handed_off(r.spec.id);
  } else {
    transfers_.emplace(r.spec.id,
                       Handoff{.from = from,
                               .to = static_cast<size_t>(best),
                               .bytes = r.prompt_tokens * source.pool().kv().kv_bytes_per_token(),
                               .handed_at = events_.now()});
  }
  to.replica->arrive_transferred(state);
}

void Cluster::pulled(int64_t id) {
  auto t = transfers_.find(id);
  KVSIM_CHECK(t != transfers_.end(), "request {} pulled without a hand-off", id);
  members_[t->second.from]->link_queue.push_back(id);
  start_transfer(t->second.from);
}

void Cluster::start_transfer(size_t from) {
  Member& m = *members_[from];
  if (m.link_busy || m.link_queue.empty()) return;
  const int64_t id = m.link_queue.front();
  m.link_queue.pop_front();
  const Handoff& h = transfers_.at(id);
  const SimTime took = transfer_.duration(h.bytes);
  totals_.on_kv_transfer_wait(sim_to_seconds(events_.now() - h.handed_at));
  totals_.on_kv_transfer(sim_to_seconds(took));
  m.link_busy = true;
  events_.schedule(took, [this, from, id] { transfer_done(from, id); });
}

void Cluster::transfer_done(size_t from, int64_t id) {
  members_[from]->link_busy = false;
  if (transfers_.count(id)) {  // (else a crash on either side ended it while it crossed)
    const Handoff h = forget(id);
    members_[h.from]->replica->release_handed_off(id);
    members_[h.to]->replica->receive_transferred(id);
  }
  start_transfer(from);
}

void Cluster::abandoned(int64_t id) {
  const Handoff h = forget(id);
  members_[h.from]->replica->release_handed_off(id);
}

void Cluster::dropped(int64_t id) {
  if (!transfers_.count(id)) return;
  const Handoff h = forget(id);
  members_[h.to]->replica->cancel_transferred(id);
}

Cluster::Handoff Cluster::forget(int64_t id) {
  auto t = transfers_.find(id);
  KVSIM_CHECK(t != transfers_.end(), "request {} has no hand-off", id);
  const Handoff h = t->second;
  transfers_.erase(t);
  std::deque<int64_t>& q = members_[h.from]->link_queue;
  if (auto it = std::find(q.begin(), q.end(), id); it != q.end()) q.erase(it);
  return h;
}

void Cluster::set_check_invariants(bool on) {
  for (auto& m : members_) m->replica->set_check_invariants(on);
}

void Cluster::sample() {
  for (auto& m : members_) m->replica->sample();
}

void Cluster::finish() {
  for (auto& m : members_) {
    m->replica->finish();
    KVSIM_CHECK(m->outstanding == 0, "replica {}: {} requests never finished", m->label,
                m->outstanding);
    KVSIM_CHECK(m->link_queue.empty() && !m->link_busy, "replica {}: transfers left", m->label);
  }
  KVSIM_CHECK(transfers_.empty(), "{} hand-offs never ended", transfers_.size());
}

}  // namespace kvsim
