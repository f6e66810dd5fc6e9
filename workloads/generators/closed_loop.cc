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
  stopped_.assign(static_cast<size_t>(p_.count), false);
  if (p_.sessions) {
    for (int c = 0; c < p_.count; ++c) session_clients_.emplace_back(c);
    fan_outs_.resize(static_cast<size_t>(p_.count));
  }
}

RequestSpec ClosedLoopClients::stamp(int client, SimTime arrival) {
  RequestSpec r;
  r.id = (*next_id_)++;
  r.arrival = arrival;
  r.client = client;
  r.priority = p_.tags.priority;
  r.max_queue_time = p_.tags.max_queue_time;
  ++issued_;
  return r;
}

RequestSpec ClosedLoopClients::make(int client, SimTime arrival) {
  Rng& rng = length_rngs_[static_cast<size_t>(client)];
  RequestSpec r = stamp(client, arrival);
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

bool ClosedLoopClients::may_send(int client, SimTime at) {
  if ((p_.max_requests && issued_ >= *p_.max_requests) || (p_.duration && at >= *p_.duration)) {
    stopped_[static_cast<size_t>(client)] = true;
  }
  return !stopped_[static_cast<size_t>(client)];
}

std::optional<RequestSpec> ClosedLoopClients::next_after_completion(int client,
                                                                    SimTime finished_at) {
  KVSIM_CHECK(client >= 0 && client < p_.count, "client {} of {}", client, p_.count);
  KVSIM_CHECK(started_[static_cast<size_t>(client)], "client {} not started", client);
  if (stopped_[static_cast<size_t>(client)]) return std::nullopt;
  if (p_.max_requests && issued_ >= *p_.max_requests) return std::nullopt;  // before the draws
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
  if (!may_send(client, at)) return std::nullopt;
  return make(client, at);
}

std::vector<RequestSpec> ClosedLoopClients::after_completion(const RequestSpec& ended,
                                                             SimTime finished_at) {
  const int c = ended.client;
  KVSIM_CHECK(c >= 0 && c < p_.count, "client {} of {}", c, p_.count);
  std::vector<RequestSpec> out;
  if (stopped_[static_cast<size_t>(c)]) return out;
  if (p_.sessions && fan_outs_[static_cast<size_t>(c)]) {
    const int j = fan_outs_[static_cast<size_t>(c)]->branch_of(ended.id);
    KVSIM_CHECK(j >= 0, "request {} is no branch of client {}'s fan-out", ended.id, c);
    send_branch(c, j, finished_at, out);
    if (fan_outs_[static_cast<size_t>(c)]->joined()) join(c, finished_at, out);
    return out;
  }
  if (p_.sessions && p_.sessions->fan_out &&
      p_.sessions->fan_out->fans_out_after(session_clients_[static_cast<size_t>(c)].turns_made(),
                                           length_rngs_[static_cast<size_t>(c)])) {
    start_fan_out(c, finished_at, out);
    return out;
  }
  if (auto next = next_after_completion(c, finished_at)) out.push_back(std::move(*next));
  return out;
}

void ClosedLoopClients::start_fan_out(int client, SimTime finished_at,
                                      std::vector<RequestSpec>& out) {
  const FanOutParams& f = *p_.sessions->fan_out;
  const LengthDist& output = f.output_tokens ? *f.output_tokens : p_.output_tokens;
  Rng& lengths = length_rngs_[static_cast<size_t>(client)];
  Rng& gaps = think_rngs_[static_cast<size_t>(client)];
  // Branch by branch, turn by turn: new tokens, output, then the gap before the turn.
  std::vector<std::vector<FanOut::SubTurn>> plan(static_cast<size_t>(f.width));
  for (auto& turns : plan) {
    for (int64_t i = 0; i < f.turns; ++i) {
      FanOut::SubTurn t{.added = f.turn_tokens.sample(lengths), .gap = f.think};
      t.output = output.sample(lengths);
      if (p_.exponential_think && t.gap > 0) {
        t.gap = seconds_to_sim(gaps.exponential(sim_to_seconds(t.gap)));
      }
      turns.push_back(t);
    }
  }
  auto& fan = fan_outs_[static_cast<size_t>(client)];
  fan.emplace(session_clients_[static_cast<size_t>(client)].history(), std::move(plan));
  for (int j = 0; j < fan->width(); ++j) send_branch(client, j, finished_at, out);
  if (fan->joined()) join(client, finished_at, out);  // none could be sent: the client stops
}

void ClosedLoopClients::send_branch(int client, int j, SimTime finished_at,
                                    std::vector<RequestSpec>& out) {
  FanOut& fan = *fan_outs_[static_cast<size_t>(client)];
  const std::optional<FanOut::Send> s = fan.next_turn(j, p_.sessions->max_context_tokens);
  if (!s) return;
  const SimTime at = finished_at + s->gap;
  if (!may_send(client, at)) {
    fan.drop(j);
    return;
  }
  RequestSpec r = stamp(client, at);
  r.prompt_tokens = s->prompt_tokens;
  r.output_tokens = s->output_tokens;
  r.prefix_hashes = session_clients_[static_cast<size_t>(client)].branch_hashes(
      *p_.sessions, fan.shared_tokens(), j, s->prompt_tokens);
  r.hash_block_tokens = p_.sessions->hash_block_tokens;
  fan.sent(j, r.id);
  out.push_back(std::move(r));
}

void ClosedLoopClients::join(int client, SimTime finished_at, std::vector<RequestSpec>& out) {
  auto& fan = fan_outs_[static_cast<size_t>(client)];
  session_clients_[static_cast<size_t>(client)].add_to_history(fan->answer_tokens());
  fan.reset();
  if (auto next = next_after_completion(client, finished_at)) out.push_back(std::move(*next));
}

}  // namespace kvsim
