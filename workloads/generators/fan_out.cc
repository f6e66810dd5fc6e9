#include "workloads/generators/fan_out.h"

#include "core/check.h"

namespace kvsim {

bool FanOutParams::fans_out_after(int64_t turns_made, Rng& rng) const {
  if (turns_made == 0) return false;
  if (every > 0) return turns_made % every == 0;
  return probability > 0 && rng.uniform01() < probability;
}

FanOut::FanOut(int64_t shared_tokens, std::vector<std::vector<SubTurn>> plan)
    : shared_(shared_tokens) {
  KVSIM_CHECK(!plan.empty(), "a fan-out of no branch");
  for (auto& turns : plan) {
    KVSIM_CHECK(!turns.empty(), "a fan-out branch of no turn");
    branches_.push_back(Branch{.turns = std::move(turns)});
  }
}

std::optional<FanOut::Send> FanOut::next_turn(int j, int64_t max_context_tokens) {
  Branch& b = branches_.at(static_cast<size_t>(j));
  KVSIM_CHECK(!b.ended, "branch {} has ended", j);
  if (b.made == static_cast<int64_t>(b.turns.size())) {
    b.ended = true;
    return std::nullopt;
  }
  const SubTurn& t = b.turns[static_cast<size_t>(b.made)];
  int64_t prompt = shared_ + t.added;
  if (b.made > 0) {
    prompt = b.prompt + b.turns[static_cast<size_t>(b.made - 1)].output + t.added;
    if (max_context_tokens > 0 && prompt + t.output > max_context_tokens) {
      b.ended = true;
      return std::nullopt;
    }
  }
  b.prompt = prompt;
  ++b.made;
  b.request = -1;
  return Send{.prompt_tokens = prompt, .output_tokens = t.output, .gap = t.gap};
}

void FanOut::sent(int j, int64_t request_id) {
  branches_.at(static_cast<size_t>(j)).request = request_id;
}

void FanOut::drop(int j) {
  Branch& b = branches_.at(static_cast<size_t>(j));
  --b.made;  // the turn was never sent: it is no answer
  b.ended = true;
}

int FanOut::branch_of(int64_t request_id) const {
  for (size_t j = 0; j < branches_.size(); ++j) {
    if (!branches_[j].ended && branches_[j].request == request_id) return static_cast<int>(j);
  }
  return -1;
}

bool FanOut::joined() const {
  for (const Branch& b : branches_) {
    if (!b.ended) return false;
  }
  return true;
}

int64_t FanOut::answer_tokens() const {
  int64_t sum = 0;
  for (const Branch& b : branches_) {
    if (b.made > 0) sum += b.turns[static_cast<size_t>(b.made - 1)].output;
  }
  return sum;
}

}  // namespace kvsim
