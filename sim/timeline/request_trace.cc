#include "sim/timeline/request_trace.h"

#include <fmt/format.h>

namespace kvsim {

class RequestTrace::Track final : public ReplicaObserver {
 public:
  Track(int64_t id, std::string label, Policy& policy)
      : id_(id), label_(std::move(label)), policy_(policy) {}
  bool needs_every_iteration() const override { return false; }
  void on_request(const RequestEvent& e) override {
    if (e.id != id_) return;
    policy_.lines.push_back(label_.empty() ? request_event_line(e)
                                           : fmt::format("[{}] {}", label_, request_event_line(e)));
  }

 private:
  int64_t id_;
  std::string label_;
  Policy& policy_;
};

RequestTrace::RequestTrace(int64_t id, std::string policy) : id_(id), policy_(std::move(policy)) {}

RequestTrace::~RequestTrace() = default;

ReplicaObserver* RequestTrace::track(const std::string& policy, const std::string& label) {
  if (!policy_.empty() && policy != policy_) return nullptr;
  if (policies_.empty() || policies_.back()->name != policy) {
    policies_.push_back(std::make_unique<Policy>(Policy{.name = policy, .lines = {}}));
  }
  tracks_.push_back(std::make_unique<Track>(id_, label, *policies_.back()));
  return tracks_.back().get();
}

std::string RequestTrace::text() const {
  std::string out;
  for (const auto& p : policies_) {
    out += fmt::format("request {}, policy {}:\n", id_, p->name);
    if (p->lines.empty()) out += "  (no such request in this policy's traffic)\n";
    for (const std::string& line : p->lines) out += "  " + line + "\n";
  }
  return out;
}

namespace {

// Simulated time in seconds, exact to the nanosecond (SimTime is integer ns).
std::string trace_seconds(SimTime t) {
  return fmt::format("{}.{:09d} s", t / 1'000'000'000, t % 1'000'000'000);
}

std::string trace_kv(const RequestEvent& e) {
  std::string s = fmt::format("KV {} tokens", e.kv_tokens);
  if (e.kv_blocks >= 0) s += fmt::format(" in {} blocks", e.kv_blocks);
  if (e.swapped_tokens > 0) s += fmt::format(", {} tokens in host memory", e.swapped_tokens);
  return s;
}

std::string trace_what(const RequestEvent& e) {
  using K = RequestEventKind;
  switch (e.kind) {
    case K::kArrived:
      return fmt::format("arrived{}: {} prompt tokens, {} output tokens",
                         e.detail.empty() ? "" : fmt::format(" ({})", e.detail), e.prompt_tokens,
                         e.output_tokens);
    case K::kQueuedBehind: return "queued behind the guard queue";
    case K::kGuard: return fmt::format("guard {}", e.detail);
    case K::kAdmitted:
      return fmt::format("admitted past the guards ({} prompt tokens): waits for its prefill",
                         e.prompt_tokens);
    case K::kScheduled:
      return fmt::format("scheduled: prefill of {} tokens ({} from the prefix cache); {}",
                         e.prefill_target, e.prefilled, trace_kv(e));
    case K::kPrefillChunk:
      return fmt::format("prefill chunk of {} tokens ({}/{}); {}", e.chunk_tokens, e.prefilled,
                         e.prefill_target, trace_kv(e));
    case K::kPrefillDone:
      return e.generated == 1
                 ? fmt::format("first token; {}", trace_kv(e))
                 : fmt::format("recompute done: token {}; {}", e.generated, trace_kv(e));
    case K::kPreempted:
      return fmt::format("preempted ({}), {} tokens generated; {}",
                         e.swapped_tokens > 0 ? "swapped out" : "to recompute", e.generated,
                         trace_kv(e));
    case K::kSwappedIn: return fmt::format("swapped in, decodes again; {}", trace_kv(e));
    case K::kFinished:
      return fmt::format("finished: {}, {} tokens generated, {} preemption(s); {}",
                         outcome_name(e.outcome), e.generated, e.preemptions, trace_kv(e));
  }
  return "?";
}

}  // namespace

std::string request_event_line(const RequestEvent& e) {
  return trace_seconds(e.t) + "  " + trace_what(e);
}

}  // namespace kvsim
