// Closed-loop clients: N users, each sending its next request a think time after its previous
// one ended. The next arrival depends on when the server finished, so this cannot be a pull
// WorkloadSource; the engine drives it explicitly:
//   for c in 0..count()-1: schedule(first_request(c))
//   when request r of client c reaches any terminal outcome at time t (completed, rejected, ...):
//     for (RequestSpec& s : after_completion(r, t)) schedule(s)
// A session's fan-out (fan_out.h) puts several of a client's requests in flight at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "workloads/generators/sessions.h"
#include "workloads/lengths.h"
#include "workloads/random.h"
#include "workloads/request_spec.h"

namespace kvsim {

struct ClosedLoopParams {
  int count = 1;
  SimTime think = 0;               // mean think time between a completion and the next request
  bool exponential_think = false;  // false: exactly `think`; true: exponential with that mean
  SimTime stagger = 0;             // first requests at c * stagger / count (0: all at t = 0)
  LengthDist prompt_tokens = LengthDist::fixed(1);
  LengthDist output_tokens = LengthDist::fixed(1);
  std::optional<SimTime> duration;      // no request arrives at t >= duration (first ones excepted)
  std::optional<int64_t> max_requests;  // total over all clients; Requires: >= count
  RequestTags tags;                     // stamped on every request
  // Multi-turn sessions (clients type sessions; sessions.h): prompt_tokens is then a session's
  // first prompt, and each later turn resends the history. nullopt: independent requests.
  std::optional<SessionParams> sessions;
};

class ClosedLoopClients {
 public:
  // `next_id` may be shared with an OpenLoopSource carrying bursts: ids stay unique and dense in
  // the order requests are created.
  ClosedLoopClients(ClosedLoopParams params, uint64_t seed,
                    std::shared_ptr<int64_t> next_id = std::make_shared<int64_t>(0));

  int count() const { return p_.count; }
  // Client c's first request. Requires: 0 <= c < count(), called once per client, before any
  // next_after_completion(c, ...).
  RequestSpec first_request(int client);
  // Client c's next request, arriving `think` after `finished_at`; nullopt once the duration or
  // max_requests is reached (the client then stops for good). Requires: client's previous request
  // has ended at `finished_at`.
  // Without fan-out, the one request in flight is the client's last, and this is
  // after_completion() with the client alone.
  std::optional<RequestSpec> next_after_completion(int client, SimTime finished_at);
  // What follows `ended`, a request of client ended.client, ending at `finished_at`: none, the
  // client's next turn, a fan-out's sub-session turns (all at once when it starts), or the
  // parent's next turn once its last sub-session ended. Requires: `ended` came from this object.
  std::vector<RequestSpec> after_completion(const RequestSpec& ended, SimTime finished_at);
  int64_t requests_issued() const { return issued_; }

 private:
  // A request of `client` arriving at `arrival`, its id, tags and count set.
  RequestSpec stamp(int client, SimTime arrival);
  RequestSpec make(int client, SimTime arrival);
  // Whether a request arriving at `at` may be sent; the client stops for good when not.
  bool may_send(int client, SimTime at);
  void start_fan_out(int client, SimTime finished_at, std::vector<RequestSpec>& out);
  // Sends branch j's next turn, if any, after `finished_at`.
  void send_branch(int client, int j, SimTime finished_at, std::vector<RequestSpec>& out);
  // Ends a joined fan-out: its answers join the history, and the parent's next turn follows.
  void join(int client, SimTime finished_at, std::vector<RequestSpec>& out);

  ClosedLoopParams p_;
  // Per client, so client c's k-th request has the same lengths whatever the server did.
  std::vector<Rng> length_rngs_;
  std::vector<Rng> think_rngs_;
  std::vector<bool> started_;
  std::vector<SessionClient> session_clients_;   // with sessions: one per client
  std::vector<std::optional<FanOut>> fan_outs_;  // with sessions: each client's in flight
  std::vector<bool> stopped_;                    // duration or max_requests reached
  std::shared_ptr<int64_t> next_id_;
  int64_t issued_ = 0;
};

}  // namespace kvsim
