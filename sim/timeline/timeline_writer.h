// `kvsim run --timeline FILE.json`: the run as a Chrome trace-event file (the JSON object format
// with "traceEvents"), which Perfetto (ui.perfetto.dev) and chrome://tracing open. One process
// per policy, one thread per replica; each forward pass is a complete ('X') slice, the memory and
// queue figures after it are counters ('C'), and OOM crashes and aborts, restarts, preemptions
// and refused requests are instant ('i') events. Only what happens inside the window
// [start, end) (simulated seconds) is written, so a long run's trace stays small. docs/timeline.md
// has the format and an example.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "sim/metrics/observer.h"

namespace kvsim {

struct TimelineWindow {
  double start_s = 0;
  double end_s = std::numeric_limits<double>::infinity();
};

// Parses --timeline-window's "START:END" (seconds; either side may be empty: from the start, to
// the end). Throws InputError.
TimelineWindow parse_timeline_window(const std::string& text);

class TimelineWriter {
 public:
  // Opens the file (written atomically: complete on commit(), absent otherwise).
  TimelineWriter(const std::filesystem::path& path, TimelineWindow window);
  ~TimelineWriter();
  TimelineWriter(const TimelineWriter&) = delete;
  TimelineWriter& operator=(const TimelineWriter&) = delete;

  // The observer of policy `policy`'s replica `replica`: its track (pid = policy + 1,
  // tid = replica + 1, both named; the thread "replica N", or `replica_name` when given, e.g. a
  // cluster replica's label). Owned by the writer; valid until the writer goes.
  ReplicaObserver* track(int policy, const std::string& policy_name, int replica = 0,
                         const std::string& replica_name = "");
  // Closes the JSON and renames the file into place.
  void commit();

  class Track;  // timeline_writer.cc

 private:
  friend class Track;
  void emit(const std::string& event);  // one event object, comma-separated from the last
  bool in_window(SimTime t) const { return t >= start_ && t < end_; }

  AtomicFile file_;
  SimTime start_;
  SimTime end_;
  bool first_ = true;
  std::vector<std::unique_ptr<Track>> tracks_;
};

}  // namespace kvsim
