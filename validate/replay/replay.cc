#include "validate/replay/replay.h"

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "models/memory/kv_capabilities.h"
#include "sim/config/scenario.h"
#include "sim/run/scenario_runner.h"
#include "validate/backend.h"

namespace kvsim::validate {

namespace {

// The backend's clock with a row of iterations.csv per iteration: what the latency model said
// (ClockBatch::modeled) next to what the clock measured. Releases pass through.
class RecordingClock : public IterationClock {
 public:
  RecordingClock(std::unique_ptr<IterationClock> inner, AtomicFile& out, std::string policy,
                 int replica, double& modeled_total, double& measured_total)
      : inner_(std::move(inner)),
        out_(out),
        policy_(std::move(policy)),
        replica_(replica),
        modeled_total_(modeled_total),
        measured_total_(measured_total) {}

  double seconds(const ClockBatch& b) override {
    const double measured = inner_->seconds(b);
    int64_t prefill_tokens = 0;
    for (const ClockSeq& s : b.prefill) prefill_tokens += s.new_tokens;
    const double modeled = b.modeled != nullptr ? b.modeled->seconds : 0;
    // start_s: nanosecond simulated times, so 9 decimals are exact; durations round-trip at 9
    // significant digits.
    out_.append(fmt::format("{},{},{},{:.9f},{},{},{},{},{:.9g},{:.9g}\n", policy_, replica_,
                            index_++, b.start_s, b.prefill.size(), prefill_tokens, b.decode.size(),
                            b.shape != nullptr ? b.shape->decode_context_tokens : 0, modeled,
                            measured));
    modeled_total_ += modeled;
    measured_total_ += measured;
    return measured;
  }
  void release(int64_t request_id) override { inner_->release(request_id); }
  void release_all() override { inner_->release_all(); }

 private:
  std::unique_ptr<IterationClock> inner_;
  AtomicFile& out_;
  std::string policy_;
  int replica_;
  int64_t index_ = 0;
  double& modeled_total_;
  double& measured_total_;
};

// A path as a YAML double-quoted string (a --set value is read as YAML).
std::string yaml_quoted(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

void check_options(const ReplayOptions& o) {
  check_forward_backend(o.backend);
  if (o.out_dir.empty()) throw InputError("replay: an output folder is required (-o DIR)");
  if (o.repeats < 1)
    throw InputError(fmt::format("--repeats: expected an integer >= 1, got {}", o.repeats));
  if (o.threads < 1)
    throw InputError(fmt::format("--threads: expected an integer >= 1, got {}", o.threads));
  if (!o.profile.empty() && !std::filesystem::is_regular_file(o.profile)) {
    throw InputError(fmt::format("--profile: no such file: {}", o.profile.string()));
  }
}

}  // namespace

std::vector<std::string> profile_sets(const ConfigNode& raw, const std::filesystem::path& profile) {
  std::vector<std::string> sets;
  if (profile.empty()) return sets;
  const std::string p = yaml_quoted(std::filesystem::absolute(profile).string());
  sets.push_back("engine.profile=" + p);
  if (auto policies = raw.peek("policies"); policies && policies->is_sequence()) {
    for (size_t i = 0; i < policies->size(); ++i) {
      sets.push_back(fmt::format("policies.{}.engine.profile={}", i, p));
    }
  }
  return sets;
}

ForwardSetup forward_setup(const GpuMemoryPool& pool, const ReplayOptions& o) {
  ForwardSetup f;
  f.model = pool.model();
  if (const PagedBlocks* paged = pool.kv().paged()) {
    f.block_tokens = static_cast<int>(paged->block_tokens());
    f.num_blocks = paged->total_blocks();
  } else {
    f.block_tokens = 16;
    f.num_blocks = pool.kv().usage().capacity_bytes / pool.model().kv_bytes_per_token() / 16;
  }
  f.seed = o.seed;
  f.repeats = o.repeats;
  f.threads = o.threads;
  return f;
}

void run_replay(const ReplayOptions& o) {
  check_options(o);
  const ConfigNode raw = ConfigNode::parse_file(o.scenario);
  const Scenario s = load_scenario_with_sets(raw, profile_sets(raw, o.profile), Catalog::builtin());
  const std::string device =
      o.clock_override ? std::string("test clock") : make_backend(o.backend)->device_name();

  AtomicFile iterations(o.out_dir / "iterations.csv");
  iterations.append(kIterationsHeader);
  double modeled_total = 0, measured_total = 0;
  RunOptions run;
  run.out_dir = o.out_dir.string();
  run.make_clock = [&](const ReplicaContext& c) -> std::unique_ptr<IterationClock> {
    const ForwardSetup setup = forward_setup(*c.pool, o);
    std::unique_ptr<IterationClock> inner =
        o.clock_override ? o.clock_override(setup) : make_forward(o.backend, setup);
    return std::make_unique<RecordingClock>(std::move(inner), iterations, c.policy, c.replica,
                                            modeled_total, measured_total);
  };
  run.marks = {{"clock", "measured"},  {"backend", o.backend}, {"device", device},
               {"repeats", o.repeats}, {"threads", o.threads}, {"forward_seed", o.seed}};
  run.extra_files = {{"iterations.csv", &iterations}};
  const RunResult r = run_scenario(s, run);
  if (!o.quiet) {
    int64_t requests = 0;
    for (const PolicySummary& p : r.policies) requests += p.requests_total;
    fmt::print(
        "replay: {} policies, {} requests on {} ({}); the iterations' time: measured {:.3f} s, "
        "modeled {:.3f} s; results in {}\n",
        r.policies.size(), requests, o.backend, device, measured_total, modeled_total,
        o.out_dir.string());
  }
}

}  // namespace kvsim::validate
