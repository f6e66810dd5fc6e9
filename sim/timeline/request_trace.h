// RequestTrace: one request's life in a run, one line per event, as its replicas report it
// (ReplicaObserver::on_request): `kvsim run --trace-request ID [--policy NAME]`
// (docs/trace-request.md). It watches requests only, so the replicas keep their fast-forward
// on, and the text is the same with it on and off.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/metrics/observer.h"

namespace kvsim {

class RequestTrace {
 public:
  // Traces request `id` under policy `policy`, or under every policy when it is empty.
  explicit RequestTrace(int64_t id, std::string policy = "");
  ~RequestTrace();
  RequestTrace(const RequestTrace&) = delete;
  RequestTrace& operator=(const RequestTrace&) = delete;

  // The observer of policy `policy`'s replica `label` ("" without a cluster); nullptr when that
  // policy is not traced. Owned by the trace.
  ReplicaObserver* track(const std::string& policy, const std::string& label);
  // Per traced policy, in the order they ran: a heading, then the request's events (a line that
  // says so when it had none: no such request in that policy's traffic).
  std::string text() const;

 private:
  class Track;
  struct Policy {
    std::string name;
    std::vector<std::string> lines;
  };
  int64_t id_;
  std::string policy_;
  std::vector<std::unique_ptr<Policy>> policies_;
  std::vector<std::unique_ptr<Track>> tracks_;
};

// One event's line (no newline), e.g.
// "1.250000000 s  prefill chunk of 512 tokens (512/1000); KV 512 tokens in 32 blocks".
std::string request_event_line(const RequestEvent& e);

}  // namespace kvsim
