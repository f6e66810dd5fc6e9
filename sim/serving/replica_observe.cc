// Replica: a request's events for its observer (ReplicaObserver::on_request), with the request's
// true figures at the event. Replica::observe is called at each point where a request's state
// changes (one line each: in the replica's step functions, and through the observe hooks of
// AdmissionQueue and RunQueues); with the fast-forward on, a request's
// figures may lag while it decodes in the aggregate, and RunQueues::lag says by how much, so the
// figures told here are those stepping has at the same instant. The fast-forward itself makes no
// request event of its own: inside a stretch a member's only event is its completion, which goes
// through finish_request as when stepping (sim/serving/fast_forward/stretch.cc).
#include <fmt/format.h>

#include "sim/serving/replica.h"

namespace kvsim {

namespace {

std::string_view guard_action_name(Decision::Action a) {
  switch (a) {
    case Decision::Action::kAdmit: return "admit";
    case Decision::Action::kReject: return "reject";
    case Decision::Action::kRejectTooLong: return "reject (too long)";
    case Decision::Action::kTruncate: return "truncate";
    case Decision::Action::kQueue: return "queue";
  }
  return "?";
}

}  // namespace

void Replica::observe_request(RequestEventKind kind, const RequestState& r, std::string_view detail,
                              int64_t chunk) {
  observer_->on_request(request_event(kind, r, detail, chunk));
}

std::optional<RequestEvent> Replica::request_view(int64_t id) const {
  const auto f = requests_.find(id);
  if (f == requests_.end()) return std::nullopt;
  return request_event(RequestEventKind::kArrived, f->second, {}, 0);
}

RequestEvent Replica::request_event(RequestEventKind kind, const RequestState& r,
                                    std::string_view detail, int64_t chunk) const {
  const AggregateLag lag = queues_.lag(r);
  const KvStore& kv = pool_.kv();
  const int64_t id = r.spec.id;
  const bool held = kv.holds(id);
  // With a deferral window open the store's per-request figures wait for its settling: the
  // window's count holds (RequestState::kv_tokens_held).
  const bool window = r.kv_tokens > 0;
  RequestEvent e{.kind = kind,
                 .t = events_.now(),
                 .id = id,
                 .prompt_tokens = r.prompt_tokens,
                 .output_tokens = r.spec.output_tokens,
                 .generated = r.generated_at(lag),
                 .prefilled = r.prefilled,
                 .prefill_target = r.prefill_target,
                 .chunk_tokens = chunk,
                 .kv_tokens = held ? r.kv_tokens_held(window ? 0 : kv.tokens(id), lag) : 0,
                 .swapped_tokens = r.phase == Phase::kSwapped ? r.swapped_tokens : 0,
                 .preemptions = r.preemptions,
                 .outcome = r.outcome,
                 .detail = detail};
  if (const PagedBlocks* paged = kv.paged(); paged != nullptr) {
    // An open window's blocks: those its tokens span (the store attributes a long window's
    // crossings when it settles).
    const int64_t bt = paged->block_tokens();
    e.kv_blocks = !held ? 0 : window ? (e.kv_tokens + bt - 1) / bt : paged->held_blocks(id);
  }
  return e;
}

void Replica::observe_guard(const RequestState& r, std::string_view guard, const Decision& d) {
  if (observer_ == nullptr) return;
  const std::string detail =
      fmt::format("{}: {} ({})", guard, guard_action_name(d.action), d.reason);
  observe_request(RequestEventKind::kGuard, r, detail, 0);
}

}  // namespace kvsim
