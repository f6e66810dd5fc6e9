#include "sim/cluster/cluster.h"

#include "core/check.h"

namespace kvsim {

Cluster::Cluster(EventQueue& events, std::unique_ptr<Router> router, Recorder& totals)
    : events_(events), router_(std::move(router)), totals_(totals) {
  KVSIM_CHECK(router_ != nullptr, "a cluster needs a router");
}

Replica& Cluster::add_replica(std::string label, GpuMemoryPool& pool, const LatencyModel& latency,
                              EngineConfig config, std::vector<std::unique_ptr<Guard>> guards,
                              Recorder& recorder, int64_t kv_pool_bytes) {
  auto m = std::make_unique<Member>();
  m->label = std::move(label);
  m->replica = std::make_unique<Replica>(events_, pool, latency, std::move(config),
                                         std::move(guards), recorder);
  m->kv_pool_bytes = static_cast<double>(kv_pool_bytes);
  Member* member = m.get();
  m->replica->set_on_finished([this, member](const RequestState& r) {
    --member->outstanding;
    if (on_finished_) on_finished_(r);
  });
  members_.push_back(std::move(m));
  views_.resize(members_.size());
  return *member->replica;
}

void Cluster::arrive(const RequestSpec& spec) {
  for (size_t i = 0; i < members_.size(); ++i) {
    const Member& m = *members_[i];
    ReplicaView& v = views_[i];
    v.outstanding = m.outstanding;
    v.up = !m.replica->down();
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
  m.replica->arrive(spec);
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
    KVSIM_CHECK(m->outstanding == 0, "replica {}: {} requests never finished", m->label, m->outstanding);
  }
}

}  // namespace kvsim
