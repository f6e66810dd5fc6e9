// Every request ends in exactly one outcome.
#pragma once

#include <array>
#include <string_view>

namespace kvsim {

enum class Outcome {
  kNone,                // still in flight (never a final outcome)
  kCompleted,           // served in full
  kCompletedTruncated,  // served, with its prompt cut by a guard
  kRejected,            // refused by a guard (HTTP 429)
  kRejectedTooLong,     // can never fit (prompt or worst case beyond what the server holds)
  kTimedOut,            // waited in a guard's queue past its timeout
  kLostOom,             // in flight or queued when the server crashed (or aborted on OOM)
  kFailedUnavailable,   // arrived while the server was restarting
};

inline constexpr std::array<Outcome, 7> kFinalOutcomes = {
    Outcome::kCompleted,        Outcome::kCompletedTruncated, Outcome::kRejected,
    Outcome::kRejectedTooLong,  Outcome::kTimedOut,           Outcome::kLostOom,
    Outcome::kFailedUnavailable};

constexpr std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kNone: return "none";
    case Outcome::kCompleted: return "completed";
    case Outcome::kCompletedTruncated: return "completed_truncated";
    case Outcome::kRejected: return "rejected";
    case Outcome::kRejectedTooLong: return "rejected_too_long";
    case Outcome::kTimedOut: return "timed_out";
    case Outcome::kLostOom: return "lost_oom";
    case Outcome::kFailedUnavailable: return "failed_unavailable";
  }
  return "none";
}

constexpr size_t outcome_index(Outcome o) { return static_cast<size_t>(o) - 1; }

}  // namespace kvsim
