// `kvsim run [SCENARIO.yaml]`: the main job. Replays the scenario's traffic under each of its
// policies, prints the comparison, and writes the result folder. Without a file it runs the
// embedded default, mixed-chat-docs (mixed short and long requests); seed A's story is
// scenarios/seed-a-guard.yaml.
#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <limits>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "apps/kvsim/commands.h"
#include "core/atomic_file.h"
#include "core/config_node.h"
#include "core/data_path.h"
#include "core/echo_text.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "sim/config/scenario.h"
#include "sim/metrics/summary_writer.h"
#include "sim/run/arguments.h"
#include "sim/run/scenario_runner.h"
#include "sim/timeline/request_trace.h"
#include "sim/timeline/timeline_writer.h"

namespace kvsim::cli {

namespace {

struct RunArgs {
  std::string scenario;
  std::string out_dir;
  std::vector<std::string> sets;
  RunOptions options;
  bool no_output = false;
  bool plot = false;
  std::string timeline_window;           // --timeline-window START:END
  std::optional<int64_t> trace_request;  // --trace-request ID
  std::string trace_policy;              // --policy NAME (with --trace-request)
};

// --policy NAME must name one of the scenario's policies (checked before the run).
void check_trace_policy(const Scenario& s, const std::string& policy) {
  if (policy.empty()) return;
  const ConfigNode policies = s.root.child("policies");
  std::string names;
  for (size_t i = 0; i < policies.size(); ++i) {
    const std::string name = policies.at(i).get<std::string>("name");
    if (name == policy) return;
    names += (names.empty() ? "" : ", ") + name;
  }
  throw InputError(fmt::format("--policy '{}': scenario {} has no such policy (its policies: {})",
                               policy, s.name, names));
}

void run(RunArgs& a) {
  const std::string file =
      a.scenario.empty() ? data_file("scenarios/mixed-chat-docs.yaml").string() : a.scenario;
  const Scenario s =
      load_scenario_with_sets(ConfigNode::parse_file(file), a.sets, Catalog::builtin());
  if (!a.timeline_window.empty()) {
    const TimelineWindow w = parse_timeline_window(a.timeline_window);
    a.options.timeline_start_s = w.start_s;
    a.options.timeline_end_s = w.end_s;
  }
  if (!a.no_output) a.options.out_dir = a.out_dir.empty() ? "out/" + s.name : a.out_dir;
  if (!a.options.out_dir.empty()) check_output_folder(a.options.out_dir);
  if (!a.options.timeline_path.empty()) check_output_path(a.options.timeline_path);
  a.options.progress = isatty(fileno(stderr)) != 0;  // never in pipes, tests or CI
  std::unique_ptr<RequestTrace> trace;
  if (a.trace_request) {
    check_trace_policy(s, a.trace_policy);
    trace = std::make_unique<RequestTrace>(*a.trace_request, a.trace_policy);
    a.options.observe = [&trace](const std::string& policy, const std::string& label) {
      return trace->track(policy, label);
    };
  }
  const RunResult r = run_scenario(s, a.options);
  for (const PolicySummary& p : r.policies) {
    if (p.in_flight_at_stop) {
      fmt::print(stderr,
                 "kvsim: --max-wall-s {} reached: policy {} stopped with {} request(s) in flight"
                 "; its results are partial (summary.json \"partial\": \"max_wall_s\")\n",
                 a.options.max_wall_s, p.name, p.in_flight_at_stop.value());
    }
  }
  fmt::print("scenario {} (model {}, gpu {}, seed {}): {}\n\n", s.name, s.model.name, s.gpu.name,
             s.seed, s.description);
  fmt::print("{}", summary_table(r.policies));
  if (!a.options.out_dir.empty()) {
    fmt::print(
        "\nresults: {}/ (summary.json, summary.csv, requests.csv, timeseries.csv, manifest.json)\n",
        a.options.out_dir);
  }
  if (!a.options.timeline_path.empty()) {
    fmt::print("timeline: {} (open in ui.perfetto.dev or chrome://tracing)\n",
               a.options.timeline_path);
  }
  if (trace) fmt::print("\n{}", trace->text());
  if (a.plot && !a.options.out_dir.empty()) {
    std::fflush(stdout);
    run_data_script(kPlotScript, {a.options.out_dir});
    run_data_script("kvsim_report.py", {a.options.out_dir, "--kvsim-version", kvsim_version()});
    fmt::print("figures: {0}/plots/  report: {0}/report.html\n", a.options.out_dir);
  }
}

// --trace-request's ID as written: decimal digits that fit an int64. CLI11 alone would clamp
// 9223372036854775808 (2^63) to the largest int64 and trace a request nobody asked for.
std::string check_request_id(std::string& text) {
  int64_t id = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, id);
  if (ec != std::errc() || stop != end || id < 0) {
    return fmt::format("expected a request id in [0, {}], got '{}'",
                       std::numeric_limits<int64_t>::max(), echo_text(text));
  }
  return "";
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* cmd =
      app.add_subcommand("run", "run a scenario (default: the embedded mixed-chat-docs scenario)");
  cmd->add_option("scenario", a->scenario, "scenario YAML file");
  cmd->add_option("-o,--out", a->out_dir, "result folder (default: out/<scenario name>)");
  cmd->add_flag("--no-output", a->no_output, "print the comparison only, write no files");
  cmd->add_flag("--plot", a->plot,
                "also render the figures (DIR/plots) and the report (DIR/report.html)");
  cmd->add_option("--set", a->sets, "override a scenario key: path=value (repeatable)");
  auto* timeline = cmd->add_option("--timeline", a->options.timeline_path,
                                   "also write the run as a Chrome trace (JSON) for Perfetto");
  cmd->add_option("--timeline-window", a->timeline_window,
                  "START:END in simulated seconds: only this part goes to the timeline")
      ->needs(timeline);
  auto* trace = cmd->add_option("--trace-request", a->trace_request,
                                "print request ID's life: arrival, guard and queue decisions, "
                                "prefill chunks, KV held, preemptions, first token, outcome")
                    ->check(CLI::Validator(check_request_id, "", "request id"))
                    ->excludes(timeline);
  cmd->add_option("--policy", a->trace_policy, "with --trace-request: only under this policy")
      ->needs(trace);
  cmd->add_flag("--check-invariants", a->options.check_invariants,
                "check memory and bookkeeping invariants after every iteration (slower)");
  cmd->add_flag_function(
      "--no-fast-forward", [a](int64_t) { a->options.fast_forward = false; },
      "step every iteration (no closed-form decode stretches; same outputs, slower)");
  cmd->add_option("--max-events", a->options.max_events,
                  "stop a runaway run after this many events")
      ->capture_default_str();
  cmd->add_option("--max-sim-time", a->options.max_sim_time_s,
                  "stop a runaway run at this simulated time (s)")
      ->capture_default_str();
  cmd->add_option("--max-wall-s", a->options.max_wall_s,
                  "stop cleanly after this many wall-clock seconds; results are written, marked "
                  "partial (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--sample-interval", a->options.sample_interval_s, "timeseries period (s)")
      ->check(CLI::Range(args::kSampleInterval.min, args::kSampleInterval.max))
      ->capture_default_str();
  cmd->callback([a] { run(*a); });
}

}  // namespace kvsim::cli
