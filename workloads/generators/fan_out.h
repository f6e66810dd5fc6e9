// Fan-out in sessions (`clients: {type: sessions, fan_out: {...}}`): after a turn, a session may
// spawn `width` sub-sessions that run in parallel, as an agent calls sub-agents or tools at once.
// Each sub-session's first prompt is the parent's history (its last prompt and output) plus the
// sub-session's own new tokens, so it shares the parent's prefix; its later turns grow as a
// session's do. The parent's next turn waits until every sub-session has ended, and its history
// grows by their final answers (each sub-session's last output), as a tool result would. All of a
// fan-out's lengths and gaps are drawn when it starts, so they never depend on the server.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/sim_time.h"
#include "workloads/lengths.h"
#include "workloads/random.h"

namespace kvsim {

struct FanOutParams {
  int64_t every = 0;       // fan out after every `every`-th turn of a session; 0: by probability
  double probability = 0;  // with every 0: after each turn, with this chance
  int64_t width = 1;       // sub-sessions per fan-out
  int64_t turns = 1;       // turns of each sub-session
  LengthDist turn_tokens = LengthDist::fixed(1);  // new tokens of each sub-session turn
  std::optional<LengthDist> output_tokens;        // nullopt: the workload's output_tokens
  SimTime think = 0;  // the gap before each sub-session turn (exponential when think is)

  // Whether a session that has made `turns_made` turns of its current session fans out now; 0
  // turns made means the session has just ended, and an ended session never fans out. Draws
  // from `rng` only for `probability` and only when the session goes on.
  bool fans_out_after(int64_t turns_made, Rng& rng) const;
};

// One fan-out in flight: its sub-sessions ("branches"), their turns drawn up front.
class FanOut {
 public:
  struct SubTurn {
    int64_t added = 0;   // new tokens
    int64_t output = 0;  // output tokens
    SimTime gap = 0;     // wait before it, after the parent's turn or the branch's last turn ended
  };
  // `shared_tokens`: the parent's history, every branch's first prompt's prefix. `plan[j]`: branch
  // j's turns, at least one each.
  FanOut(int64_t shared_tokens, std::vector<std::vector<SubTurn>> plan);

  struct Send {
    int64_t prompt_tokens = 0;
    int64_t output_tokens = 0;
    SimTime gap = 0;
  };
  // Branch j's next turn, or nullopt when the branch has ended: all its turns made, or the next
  // would pass `max_context_tokens` (0: no limit; a first turn is always made). Requires: j's
  // previous turn, if any, has ended.
  std::optional<Send> next_turn(int j, int64_t max_context_tokens);
  // Records the request that carries branch j's turn just returned by next_turn().
  void sent(int j, int64_t request_id);
  // Branch j ends without sending (the client stopped: duration or max_requests).
  void drop(int j);
  // The branch whose turn is `request_id`; -1 when none is.
  int branch_of(int64_t request_id) const;

  int64_t shared_tokens() const { return shared_; }
  int width() const { return static_cast<int>(branches_.size()); }
  // Whether every branch has ended: the parent may go on.
  bool joined() const;
  // What the parent's history grows by: the sum of each branch's last output (its answer).
  int64_t answer_tokens() const;

 private:
  struct Branch {
    std::vector<SubTurn> turns;
    int64_t made = 0;    // turns returned by next_turn()
    int64_t prompt = 0;  // the last of them's prompt
    int64_t request = -1;
    bool ended = false;
  };
  int64_t shared_;
  std::vector<Branch> branches_;
};

}  // namespace kvsim
