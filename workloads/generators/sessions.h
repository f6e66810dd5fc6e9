// Multi-turn sessions (agentic or chat) for closed-loop clients (`clients: {type: sessions}`):
// each client runs one session at a time, a session being `turns` requests. The first turn's
// prompt is the workload's prompt_tokens; every later turn resends the whole history (the
// previous prompt and its output) plus new user or tool tokens (turn_tokens), so prompts grow
// turn by turn. The gap before a turn is a tool call's (tool_s) with probability tool_share,
// else the user's think time (the clients' think_s). A session ends after `turns` turns, or
// before a turn whose prompt would pass max_context_tokens; the client then starts a new one.
// Every full `hash_block_tokens` block of a session's token stream has one hash, the same in
// every turn that sends it, so the prefix cache and the KV tiers see the history's reuse.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/sim_time.h"
#include "workloads/generators/fan_out.h"
#include "workloads/lengths.h"
#include "workloads/random.h"

namespace kvsim {

struct SessionParams {
  int64_t turns = 1;
  LengthDist turn_tokens = LengthDist::fixed(1);  // new tokens of each turn after the first
  double tool_share = 0;                          // share of later turns that answer a tool call
  SimTime tool_gap = 0;  // the gap before such a turn (exponential when think is)
  int64_t hash_block_tokens = 16;
  int64_t max_context_tokens = 0;       // 0: none
  std::optional<FanOutParams> fan_out;  // sub-sessions after some turns (fan_out.h); none: nullopt
};

// One client's sessions, one after another.
class SessionClient {
 public:
  // `client` keeps the hashes of different clients' sessions apart.
  explicit SessionClient(int client) : client_(client) {}

  struct Turn {
    int64_t prompt_tokens = 0;
    int64_t output_tokens = 0;
    std::vector<uint64_t> hashes;  // one per full hash block of the prompt
    int64_t session = 0;           // the client's session number, from 0
    int64_t turn = 0;              // the turn in it, from 0
  };
  // The next turn: `first_prompt` is drawn for a session's first turn, `added` for a later one,
  // `output` for both (each drawn by the caller, in that order, so every draw is made).
  Turn next(const SessionParams& p, int64_t first_prompt, int64_t added, int64_t output);
  // Whether the turn after the last one answers a tool call (false for a session's first turn).
  bool next_is_tool(const SessionParams& p, Rng& rng) const;

  // Turns made in the current session (0: the last turn ended it, or none was made yet).
  int64_t turns_made() const { return turn_; }
  // The current session's history: its last prompt and output (and answers added since).
  int64_t history() const { return history_; }
  // A fan-out's answers join the history the next turn resends.
  void add_to_history(int64_t tokens) { history_ += tokens; }
  // The hashes of a prompt of `prompt_tokens` tokens sent by sub-session `branch` of the fan-out
  // after the current turn: the blocks wholly inside the first `shared_tokens` (the session's
  // history) are the session's own; the rest are the branch's, found in no other branch.
  std::vector<uint64_t> branch_hashes(const SessionParams& p, int64_t shared_tokens, int branch,
                                      int64_t prompt_tokens) const;

 private:
  uint64_t session_key() const;
  uint64_t block_hash(int64_t block) const;

  int client_;
  int64_t session_ = 0;
  int64_t turn_ = 0;     // turns made in the current session
  int64_t history_ = 0;  // tokens of its history: the last prompt and its output
};

}  // namespace kvsim
