#include "workloads/generators/sessions.h"

namespace kvsim {

namespace {

// SplitMix64's finaliser: a fixed, portable mix of 64 bits.
uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t SessionClient::session_key() const {
  return mix(static_cast<uint64_t>(client_) * 0x100000001B3ull ^
             mix(static_cast<uint64_t>(session_) + 0x5E55));
}

uint64_t SessionClient::block_hash(int64_t block) const {
  // A chained hash of the block's tokens stands in for vLLM's: the same session stream gives the
  // same hash for block i in every turn, and different sessions never share one.
  return mix(session_key() ^ mix(static_cast<uint64_t>(block)));
}

std::vector<uint64_t> SessionClient::branch_hashes(const SessionParams& p, int64_t shared_tokens,
                                                   int branch, int64_t prompt_tokens) const {
  // A branch's stream is keyed by the fan-out (the turns made before it) and the branch, so it
  // parts from the session's at the first block that is not wholly the shared history.
  const uint64_t fan = mix(session_key() ^ mix(static_cast<uint64_t>(turn_) + 0xFA40) ^
                           mix(static_cast<uint64_t>(branch) + 0xB4A));
  const int64_t shared_blocks = shared_tokens / p.hash_block_tokens;
  std::vector<uint64_t> hashes;
  hashes.reserve(static_cast<size_t>(prompt_tokens / p.hash_block_tokens));
  for (int64_t b = 0; b < prompt_tokens / p.hash_block_tokens; ++b) {
    hashes.push_back(b < shared_blocks ? block_hash(b) : mix(fan ^ mix(static_cast<uint64_t>(b))));
  }
  return hashes;
}

SessionClient::Turn SessionClient::next(const SessionParams& p, int64_t first_prompt, int64_t added,
                                        int64_t output) {
  int64_t prompt = turn_ == 0 ? first_prompt : history_ + added;
  if (turn_ > 0 && p.max_context_tokens > 0 && prompt + output > p.max_context_tokens) {
    ++session_;  // the history is too long: a new session begins with this turn
    turn_ = 0;
    prompt = first_prompt;
  }
  Turn t{.prompt_tokens = prompt, .output_tokens = output, .session = session_, .turn = turn_};
  const int64_t blocks = prompt / p.hash_block_tokens;
  t.hashes.reserve(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) t.hashes.push_back(block_hash(b));
  history_ = prompt + output;
  if (++turn_ >= p.turns) {
    ++session_;
    turn_ = 0;
  }
  return t;
}

bool SessionClient::next_is_tool(const SessionParams& p, Rng& rng) const {
  if (turn_ == 0 || p.tool_share <= 0) return false;
  return rng.uniform01() < p.tool_share;
}

}  // namespace kvsim
