#include "sim/timeline/timeline_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace kvsim {

namespace {

// Trace-event timestamps are microseconds; simulated time is integer nanoseconds, written
// exactly (three decimals) so the file's bytes depend only on the run.
std::string micros(SimTime ns) {
  return fmt::format("{}.{:03d}", ns / 1000, static_cast<int>(ns % 1000));
}

SimTime window_bound(double seconds) {
  if (std::isinf(seconds)) return std::numeric_limits<SimTime>::max();
  return seconds_to_sim(seconds);
}

double parse_seconds(const std::string& text, const std::string& whole, double empty) {
  if (text.empty()) return empty;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v) || v < 0) {
    throw InputError(
        fmt::format("--timeline-window '{}': expected START:END in seconds (>= 0)", whole));
  }
  return v;
}

// The instant event's name for a request's outcome, or nullptr for outcomes that are not a
// refusal (served requests; lost ones are the crash's).
const char* refusal_name(Outcome o) {
  switch (o) {
    case Outcome::kRejected:
    case Outcome::kRejectedTooLong:
    case Outcome::kTimedOut:
    case Outcome::kFailedUnavailable: return outcome_name(o).data();
    default: return nullptr;
  }
}

}  // namespace

TimelineWindow parse_timeline_window(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    throw InputError(
        fmt::format("--timeline-window '{}': expected START:END in seconds (>= 0)", text));
  }
  TimelineWindow w;
  w.start_s = parse_seconds(text.substr(0, colon), text, 0.0);
  w.end_s = parse_seconds(text.substr(colon + 1), text, std::numeric_limits<double>::infinity());
  if (w.end_s <= w.start_s) {
    throw InputError(fmt::format("--timeline-window '{}': END must be after START", text));
  }
  return w;
}

// One replica's track: turns what the replica reports into trace events, written in time order.
// A forward pass is reported when it ends, but its slice starts when it started, before the
// instants (a queue deadline, a refusal) reported while it ran. So a track holds its events until
// an iteration ends at `e`: nothing reported later can be earlier than `e` (the clock only moves
// on, and the next pass starts at `e` or later), so every held event up to `e` is written,
// sorted by time (stably: equal times keep the order they were reported in).
class TimelineWriter::Track final : public ReplicaObserver {
 public:
  Track(TimelineWriter& w, int pid, int tid) : w_(w), pid_(pid), tid_(tid) {}

  void on_iteration(const IterationShape& s, const ReplicaState& after) override {
    if (w_.in_window(s.start)) {
      const char* name = s.prefill_seqs == 0  ? "decode"
                         : s.decode_seqs == 0 ? "prefill"
                                              : "prefill+decode";
      hold(
          s.start,
          fmt::format(
              R"({{"name":"{}","cat":"iteration","ph":"X","ts":{},"dur":{},"pid":{},"tid":{},)"
              R"("args":{{"prefill_tokens":{},"prefill_seqs":{},"decode_tokens":{},"batch_size":{},"duration_ms":{:.6f}}}}})",
              name, micros(s.start), micros(s.end - s.start), pid_, tid_, s.prefill_tokens,
              s.prefill_seqs, s.decode_seqs, s.prefill_seqs + s.decode_seqs,
              sim_to_seconds(s.end - s.start) * 1e3));
    }
    counters(after);
    flush(after.t);
  }

  // Writes the held events up to `t` (every one: the end of the run), in time order.
  void flush(SimTime t = std::numeric_limits<SimTime>::max()) {
    std::stable_sort(held_.begin(), held_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    size_t n = 0;
    for (; n < held_.size() && held_[n].first <= t; ++n) w_.emit(held_[n].second);
    held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(n));
  }

  void on_event(ReplicaEvent kind, int64_t id, Outcome outcome, const ReplicaState& now) override {
    const char* name = nullptr;
    switch (kind) {
      case ReplicaEvent::kOomCrash: name = "OOM crash"; break;
      case ReplicaEvent::kOomAbort: name = "OOM abort"; break;
      case ReplicaEvent::kRestarted: name = "restarted"; break;
      case ReplicaEvent::kPreempted: name = "preempted"; break;
      case ReplicaEvent::kFinished: name = refusal_name(outcome); break;
    }
    if (name == nullptr || !w_.in_window(now.t)) return;
    const std::string args = id >= 0 ? fmt::format(R"({{"request":{}}})", id) : "{}";
    hold(
        now.t,
        fmt::format(
            R"({{"name":"{}","cat":"event","ph":"i","s":"t","ts":{},"pid":{},"tid":{},"args":{}}})",
            name, micros(now.t), pid_, tid_, args));
    if (kind == ReplicaEvent::kOomCrash || kind == ReplicaEvent::kRestarted) counters(now);
  }

 private:
  void counters(const ReplicaState& s) {
    if (!w_.in_window(s.t)) return;
    const std::string head =
        fmt::format(R"("ph":"C","ts":{},"pid":{},"tid":{})", micros(s.t), pid_, tid_);
    hold(s.t, fmt::format(R"({{"name":"KV cache bytes",{},"args":{{"used":{},"free":{}}}}})", head,
                          s.kv_used_bytes, s.kv_free_bytes));
    hold(s.t, fmt::format(R"({{"name":"driver free bytes",{},"args":{{"free":{}}}}})", head,
                          s.driver_free_bytes));
    hold(s.t, fmt::format(
                  R"({{"name":"queues",{},"args":{{"guard_queue":{},"waiting":{},"running":{}}}}})",
                  head, s.guard_queue, s.waiting, s.running));
    if (s.cpu_tier_bytes >= 0) tier_counter(head, s);
  }
  // The memory hierarchy's occupancy on one track (engine.kv_offloading): GPU KV held, the CPU
  // tier's bytes and the disk tier's (when there is one), per GPU.
  void tier_counter(const std::string& head, const ReplicaState& s) {
    std::string args = fmt::format(R"("gpu":{},"cpu":{})", s.kv_used_bytes, s.cpu_tier_bytes);
    if (s.disk_tier_bytes >= 0) args += fmt::format(R"(,"disk":{})", s.disk_tier_bytes);
    hold(s.t, fmt::format(R"({{"name":"KV tier bytes",{},"args":{{{}}}}})", head, args));
  }
  void hold(SimTime t, std::string event) { held_.emplace_back(t, std::move(event)); }

  TimelineWriter& w_;
  int pid_;
  int tid_;
  std::vector<std::pair<SimTime, std::string>> held_;  // (timestamp, event), not yet written
};

TimelineWriter::TimelineWriter(const std::filesystem::path& path, TimelineWindow window)
    : file_(path), start_(window_bound(window.start_s)), end_(window_bound(window.end_s)) {
  file_.append(R"({"displayTimeUnit":"ms","traceEvents":[)");
}

TimelineWriter::~TimelineWriter() = default;

ReplicaObserver* TimelineWriter::track(int policy, const std::string& policy_name, int replica,
                                       const std::string& replica_name) {
  const int pid = policy + 1;
  const int tid = replica + 1;
  const std::string name = nlohmann::json(policy_name).dump();  // quoted and escaped
  emit(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"tid":{},"args":{{"name":{}}}}})",
                   pid, tid, name));
  emit(fmt::format(
      R"({{"name":"process_sort_index","ph":"M","pid":{},"tid":{},"args":{{"sort_index":{}}}}})",
      pid, tid, pid));
  const std::string thread =
      nlohmann::json(replica_name.empty() ? fmt::format("replica {}", replica) : replica_name)
          .dump();
  emit(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":{}}}}})",
                   pid, tid, thread));
  tracks_.push_back(std::make_unique<Track>(*this, pid, tid));
  return tracks_.back().get();
}

void TimelineWriter::emit(const std::string& event) {
  file_.append(first_ ? "\n" : ",\n");
  file_.append(event);
  first_ = false;
}

void TimelineWriter::commit() {
  for (auto& t : tracks_) t->flush();
  file_.append("\n]}\n");
  file_.commit();
}

}  // namespace kvsim
