#include "workloads/generators/closed_loop.h"

#include "core/check.h"

namespace kvsim {

namespace {
// Sub-streams 1000 + 2c (lengths) and 1001 + 2c (think times) of the scenario seed.
constexpr uint64_t kClientStream = 1000;
}  // namespace

ClosedLoopClients::ClosedLoopClients(ClosedLoopParams params, uint64_t seed,
                                     std::shared_ptr<int64_t> next_id)
    : p_(std::move(params)), next_id_(std::move(next_id)) {
  KVSIM_CHECK(p_.count >= 1, "closed loop needs >= 1 client, got {}", p_.count);
  KVSIM_CHECK(!p_.max_requests || *p_.max_requests >= p_.count, "max_requests {} < clients {}",
              p_.max_requests.value_or(0), p_.count);
  KVSIM_CHECK(next_id_ != nullptr, "null id counter");
  for (int c = 0; c < p_.count; ++c) {
    const auto k = static_cast<uint64_t>(c);
    length_rngs_.emplace_back(derive_seed(seed, kClientStream + 2 * k));
    think_rngs_.emplace_back(derive_seed(seed, kClientStream + 2 * k + 1));
  }
  started_.assign(static_cast<size_t>(p_.count), false);
  if (p_.sessions) {
    for (int c = 0; c < p_.count; ++c) session_clients_.emplace_back(c);
  }
}

RequestSpec ClosedLoopClients::make(int client, SimTime arrival) {
  Rng& rng = length_rngs_[static_cast<size_t>(client)];
  RequestSpec r;
  r.id = (*next_id_)++;
  r.arrival = arrival;
  r.prompt_tokens = p_.prompt_tokens.sample(rng);
  if (p_.sessions) {
    // Every draw is made whatever the turn, so a client's k-th draws never depend on its state.
    const int64_t added = p_.sessions->turn_tokens.sample(rng);
    SessionClient::Turn t = session_clients_[static_cast<size_t>(client)].next(
        *p_.sessions, r.prompt_tokens, added, p_.output_tokens.sample(rng));
    r.prompt_tokens = t.prompt_tokens;
    r.output_tokens = t.output_tokens;
    r.prefix_hashes = std::move(t.hashes);
    r.hash_block_tokens = p_.sessions->hash_block_tokens;
  } else {
    r.output_tokens = p_.output_tokens.sample(rng);
  }
  r.client = client;
  r.priority = p_.tags.priority;
  r.max_queue_time = p_.tags.max_queue_time;
  ++issued_;
  return r;
}

RequestSpec ClosedLoopClients::first_request(int client) {
  KVSIM_CHECK(client >= 0 && client < p_.count, "client {} of {}", client, p_.count);
  KVSIM_CHECK(!started_[static_cast<size_t>(client)], "client {} started twice", client);
  started_[static_cast<size_t>(client)] = true;
  const SimTime at =
      p_.stagger == 0
          ? 0
          : seconds_to_sim(sim_to_seconds(p_.stagger) * client / static_cast<double>(p_.count));
  return make(client, at);
}

std::optional<RequestSpec> ClosedLoopClients::next_after_completion(int client,
                                                                    SimTime finished_at) {
  KVSIM_CHECK(client >= 0 && client < p_.count, "client {} of {}", client, p_.count);
  KVSIM_CHECK(started_[static_cast<size_t>(client)], "client {} not started", client);
  if (p_.max_requests && issued_ >= *p_.max_requests) return std::nullopt;
  Rng& think_rng = think_rngs_[static_cast<size_t>(client)];
  SimTime think = p_.think;
  if (p_.sessions &&
      session_clients_[static_cast<size_t>(client)].next_is_tool(*p_.sessions, think_rng)) {
    think = p_.sessions->tool_gap;  // a tool call's gap instead of the user's think time
  }
  if (p_.exponential_think && think > 0) {
    think = seconds_to_sim(think_rng.exponential(sim_to_seconds(think)));
  }
  const SimTime at = finished_at + think;
  if (p_.duration && at >= *p_.duration) return std::nullopt;
  return make(client, at);
}

}  // namespace kvsim
