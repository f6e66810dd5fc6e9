// Multi-turn sessions on closed-loop clients (workloads/generators/sessions.h), by hand: a first
// prompt of 1,000 tokens, 200 new tokens a later turn, 100 output tokens, 3 turns a session,
// 16-token hash blocks, think time 2 s (fixed).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "core/sim_time.h"
#include "workloads/generators/closed_loop.h"

using namespace kvsim;

namespace {

ClosedLoopParams session_params() {
  ClosedLoopParams p;
  p.count = 2;
  p.think = seconds_to_sim(2.0);
  p.prompt_tokens = LengthDist::fixed(1000);
  p.output_tokens = LengthDist::fixed(100);
  p.sessions = SessionParams{.turns = 3, .turn_tokens = LengthDist::fixed(200)};
  return p;
}

bool same_prefix(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b, size_t n) {
  return a.size() >= n && b.size() >= n && std::equal(a.begin(), a.begin() + n, b.begin());
}

}  // namespace

// Turn 0: 1,000 tokens, 1,000 / 16 = 62 hash blocks. Turn 1 resends its history (1,000 + 100)
// and 200 new tokens: 1,300 tokens, 81 blocks, the first 62 hashes turn 0's. Turn 2: 1,300 +
// 100 + 200 = 1,600 tokens, 100 blocks, sharing turn 1's 81. Turn 3 starts a new session: 1,000
// tokens again, with none of the first session's hashes. Each turn arrives 2 s after the last
// ended.
TEST_CASE("a session's prompt grows by its history and new tokens", "[workloads][sessions]") {
  ClosedLoopClients c(session_params(), 7);
  const RequestSpec t0 = c.first_request(0);
  CHECK(t0.prompt_tokens == 1000);
  CHECK(t0.output_tokens == 100);
  CHECK(t0.prefix_hashes.size() == 62);
  CHECK(t0.hash_block_tokens == 16);
  const RequestSpec t1 = *c.next_after_completion(0, seconds_to_sim(1.0));
  CHECK(t1.arrival == seconds_to_sim(3.0));
  CHECK(t1.prompt_tokens == 1300);
  CHECK(t1.prefix_hashes.size() == 81);
  CHECK(same_prefix(t0.prefix_hashes, t1.prefix_hashes, 62));
  const RequestSpec t2 = *c.next_after_completion(0, seconds_to_sim(4.0));
  CHECK(t2.prompt_tokens == 1600);
  CHECK(t2.prefix_hashes.size() == 100);
  CHECK(same_prefix(t1.prefix_hashes, t2.prefix_hashes, 81));
  const RequestSpec t3 = *c.next_after_completion(0, seconds_to_sim(5.0));
  CHECK(t3.prompt_tokens == 1000);
  CHECK(t3.prefix_hashes.size() == 62);
  CHECK(t3.prefix_hashes.front() != t0.prefix_hashes.front());
  // Client 1's session is its own: no hash in common with client 0's.
  const RequestSpec o0 = c.first_request(1);
  CHECK(o0.prompt_tokens == 1000);
  CHECK(o0.prefix_hashes.front() != t0.prefix_hashes.front());
}

// max_context_tokens 1,500: turn 2 would hold 1,600 + 100 > 1,500 tokens, so a new session
// starts there with a 1,000-token prompt. tool_share 1 with tool_s 0.5: every later turn of a
// session answers a tool call 0.5 s after the last ended; a session's first turn waits the
// think time (2 s).
TEST_CASE("a session ends at max_context_tokens; tool turns wait tool_s", "[workloads][sessions]") {
  ClosedLoopParams p = session_params();
  p.sessions->max_context_tokens = 1500;
  p.sessions->tool_share = 1;
  p.sessions->tool_gap = seconds_to_sim(0.5);
  ClosedLoopClients c(p, 7);
  const RequestSpec t0 = c.first_request(0);
  const RequestSpec t1 = *c.next_after_completion(0, seconds_to_sim(1.0));
  CHECK(t1.arrival == seconds_to_sim(1.5));  // a tool turn
  CHECK(t1.prompt_tokens == 1300);
  const RequestSpec t2 = *c.next_after_completion(0, seconds_to_sim(2.0));
  CHECK(t2.arrival == seconds_to_sim(2.5));  // still a later turn when drawn
  CHECK(t2.prompt_tokens == 1000);           // but the history was too long: a new session
  CHECK(t2.prefix_hashes.front() != t0.prefix_hashes.front());
  const RequestSpec t3 = *c.next_after_completion(0, seconds_to_sim(3.0));
  CHECK(t3.arrival == seconds_to_sim(3.5));
  CHECK(t3.prompt_tokens == 1300);
  CHECK(same_prefix(t2.prefix_hashes, t3.prefix_hashes, 62));
}
