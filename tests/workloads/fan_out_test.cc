// Fan-out in sessions (workloads/generators/fan_out.h), by hand. The session: a first prompt of
// 1,000 tokens, 200 new tokens a later turn, 100 output tokens, 3 turns, think time 2 s (fixed),
// 16-token hash blocks. Its fan-out: every 2 turns, width 2, each sub-session of 2 turns of 50 new
// tokens and 40 output tokens, 0.5 s before each sub-session turn.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "core/config_node.h"
#include "core/sim_time.h"
#include "workloads/generators/closed_loop.h"
#include "workloads/workload.h"

using namespace kvsim;
using Catch::Matchers::Contains;

namespace {

ClosedLoopParams fan_out_session_params() {
  ClosedLoopParams p;
  p.count = 1;
  p.think = seconds_to_sim(2.0);
  p.prompt_tokens = LengthDist::fixed(1000);
  p.output_tokens = LengthDist::fixed(100);
  FanOutParams f{.every = 2, .width = 2, .turns = 2, .turn_tokens = LengthDist::fixed(50)};
  f.output_tokens = LengthDist::fixed(40);
  f.think = seconds_to_sim(0.5);
  p.sessions = SessionParams{.turns = 3, .turn_tokens = LengthDist::fixed(200), .fan_out = f};
  return p;
}

bool fan_out_same_prefix(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b, size_t n) {
  return a.size() >= n && b.size() >= n && std::equal(a.begin(), a.begin() + n, b.begin());
}

}  // namespace

// Turn 0 (id 0): 1,000 tokens at 0 s, ends at 1 s. Turn 1 (id 1): 1,100 + 200 = 1,300 tokens at
// 3 s, 81 blocks; it ends at 4 s, the session's second turn, so it fans out (every 2). The
// history is then 1,300 + 100 = 1,400 tokens, of which 1,400 / 16 = 87 whole blocks.
// Each sub-session's first turn (ids 2, 3) arrives 4 + 0.5 = 4.5 s with 1,400 + 50 = 1,450
// tokens: 90 blocks, the first 87 the session's (turn 1's 81 among them), block 87 (tokens
// 1,392..1,407, history and the branch's own) the branch's. Branch 0's first turn ends at 5 s:
// its second turn (id 4) arrives 5.5 s with 1,450 + 40 + 50 = 1,540 tokens (96 blocks, the
// first 90 its first turn's). Branch 1's ends at 6 s: id 5 at 6.5 s, 1,540 tokens. Branch 1's
// second turn ends at 7 s: nothing follows (branch 0 runs). Branch 0's ends at 8 s: the join.
// Turn 2 (id 6) arrives 8 + 2 = 10 s with the history, both answers and 200 new tokens:
// 1,400 + 40 + 40 + 200 = 1,680 tokens, 105 blocks, the first 87 the shared history's. It
// ends the session (3 turns): no fan-out after it, and the next session starts at 13 s with
// 1,000 tokens.
TEST_CASE("a turn fans out to two sub-sessions that join before the next", "[workloads][fan_out]") {
  ClosedLoopClients c(fan_out_session_params(), 7);
  const RequestSpec t0 = c.first_request(0);
  const std::vector<RequestSpec> t1 = c.after_completion(t0, seconds_to_sim(1.0));
  REQUIRE(t1.size() == 1);
  CHECK(t1[0].arrival == seconds_to_sim(3.0));
  CHECK(t1[0].prompt_tokens == 1300);
  const std::vector<RequestSpec> subs = c.after_completion(t1[0], seconds_to_sim(4.0));
  REQUIRE(subs.size() == 2);
  for (const RequestSpec& s : subs) {
    CHECK(s.arrival == seconds_to_sim(4.5));
    CHECK(s.prompt_tokens == 1450);
    CHECK(s.output_tokens == 40);
    CHECK(s.client == 0);
    CHECK(s.prefix_hashes.size() == 90);
    CHECK(fan_out_same_prefix(t1[0].prefix_hashes, s.prefix_hashes, 81));
  }
  CHECK(subs[0].id == 2);
  CHECK(subs[1].id == 3);
  CHECK(fan_out_same_prefix(subs[0].prefix_hashes, subs[1].prefix_hashes, 87));
  CHECK(subs[0].prefix_hashes[87] != subs[1].prefix_hashes[87]);
  const std::vector<RequestSpec> b0 = c.after_completion(subs[0], seconds_to_sim(5.0));
  REQUIRE(b0.size() == 1);
  CHECK(b0[0].id == 4);
  CHECK(b0[0].arrival == seconds_to_sim(5.5));
  CHECK(b0[0].prompt_tokens == 1540);
  CHECK(b0[0].prefix_hashes.size() == 96);
  CHECK(fan_out_same_prefix(subs[0].prefix_hashes, b0[0].prefix_hashes, 90));
  const std::vector<RequestSpec> b1 = c.after_completion(subs[1], seconds_to_sim(6.0));
  REQUIRE(b1.size() == 1);
  CHECK(b1[0].arrival == seconds_to_sim(6.5));
  CHECK(b1[0].prompt_tokens == 1540);
  CHECK(c.after_completion(b1[0], seconds_to_sim(7.0)).empty());
  const std::vector<RequestSpec> t2 = c.after_completion(b0[0], seconds_to_sim(8.0));
  REQUIRE(t2.size() == 1);
  CHECK(t2[0].id == 6);
  CHECK(t2[0].arrival == seconds_to_sim(10.0));
  CHECK(t2[0].prompt_tokens == 1680);
  CHECK(t2[0].output_tokens == 100);
  CHECK(t2[0].prefix_hashes.size() == 105);
  CHECK(fan_out_same_prefix(t1[0].prefix_hashes, t2[0].prefix_hashes, 81));
  CHECK(fan_out_same_prefix(subs[0].prefix_hashes, t2[0].prefix_hashes, 87));
  CHECK(subs[0].prefix_hashes[87] != t2[0].prefix_hashes[87]);
  const std::vector<RequestSpec> t3 = c.after_completion(t2[0], seconds_to_sim(11.0));
  REQUIRE(t3.size() == 1);
  CHECK(t3[0].arrival == seconds_to_sim(13.0));
  CHECK(t3[0].prompt_tokens == 1000);
  CHECK(c.requests_issued() == 8);
}

// max_requests 3: turns 0 and 1, then branch 0's first turn is the third request; branch 1's
// cannot be sent, so the client stops: branch 0's end brings nothing more.
TEST_CASE("a fan-out past max_requests stops the client", "[workloads][fan_out]") {
  ClosedLoopParams p = fan_out_session_params();
  p.max_requests = 3;
  ClosedLoopClients c(p, 7);
  const RequestSpec t0 = c.first_request(0);
  const std::vector<RequestSpec> t1 = c.after_completion(t0, seconds_to_sim(1.0));
  REQUIRE(t1.size() == 1);
  const std::vector<RequestSpec> subs = c.after_completion(t1[0], seconds_to_sim(4.0));
  REQUIRE(subs.size() == 1);
  CHECK(subs[0].prompt_tokens == 1450);
  CHECK(c.after_completion(subs[0], seconds_to_sim(5.0)).empty());
  CHECK(c.requests_issued() == 3);
}

// The keys through make_workload; a bad key is a one-line error at its place.
TEST_CASE("fan_out keys and their errors", "[workloads][fan_out]") {
  auto yaml = [](const std::string& fan_out) {
    return "workload:\n  clients:\n    type: sessions\n    count: 1\n    turns: 3\n"
           "    turn_tokens: 200\n    think_s: 2\n    fan_out: " +
           fan_out + "\n  prompt_tokens: 1000\n  output_tokens: 100\n  max_requests: 10\n";
  };
  auto good = ConfigNode::parse_string(
      yaml("{every: 2, width: 2, turns: 2, turn_tokens: 50, output_tokens: 40, think_s: 0.5}"),
      "w.yaml");
  Workload w = make_workload(good.child("workload"), 7);
  const RequestSpec t0 = w.clients->first_request(0);
  const std::vector<RequestSpec> t1 = w.clients->after_completion(t0, seconds_to_sim(1.0));
  REQUIRE(t1.size() == 1);
  const std::vector<RequestSpec> subs = w.clients->after_completion(t1[0], seconds_to_sim(4.0));
  REQUIRE(subs.size() == 2);
  CHECK(subs[1].arrival == seconds_to_sim(4.5));
  CHECK(subs[1].prompt_tokens == 1450);

  auto both = ConfigNode::parse_string(
      yaml("{every: 2, probability: 0.5, width: 2, turn_tokens: 50}"), "b.yaml");
  CHECK_THROWS_WITH(make_workload(both.child("workload"), 7),
                    Contains("b.yaml:8:14: ") && Contains("exactly one of every: or probability:"));
  auto typo =
      ConfigNode::parse_string(yaml("{every: 2, width: 2, turn_tokens: 50, widht: 3}"), "t.yaml");
  CHECK_THROWS_WITH(make_workload(typo.child("workload"), 7),
                    Contains("t.yaml:8:") && Contains("widht"));
  auto zero = ConfigNode::parse_string(yaml("{every: 0, width: 2, turn_tokens: 50}"), "z.yaml");
  CHECK_THROWS_WITH(make_workload(zero.child("workload"), 7), Contains("z.yaml:8:"));
}
