// kvsim's continuous scheduler against vLLM V1's own, step for step: each case under
// tests/conformance/vllm/cases/ holds a kvsim scenario, its trace and the steps vLLM's scheduler
// took on them (steps.jsonl, recorded by tests/conformance/vllm/record.py from the pinned vLLM
// source; provenance.json says which commit and command). The test runs the scenario through
// kvsim's engine and compares every step's shape: the requests run with their token counts, and
// the requests preempted. Both sides time a step by the scenario's engine.step_time, so the
// goldens do not move when the latency model does. docs/vllm-conformance.md.
//
// kvsim's side is seen through an IterationClock (sim/serving/iteration_clock.h), which the
// engine asks for every iteration's duration with the batch it runs: the clock records the batch
// and answers with engine.step_time's formula, the duration the engine gives that step without
// a clock. A preempted request is one whose KV the engine released (IterationClock::release)
// before a step and that runs again later; a finished one never runs again.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config_node.h"
#include "models/catalog.h"
#include "models/latency/fixed_step_time.h"
#include "sim/config/scenario.h"
#include "sim/run/scenario_runner.h"
#include "sim/serving/iteration_clock.h"

namespace fs = std::filesystem;
using namespace kvsim;

namespace {

struct Step {
  int64_t t_ns = 0;
  std::vector<std::pair<int64_t, int64_t>> run;  // (request, tokens), sorted by request
  std::vector<int64_t> preempted;                // sorted
};

std::string show(const Step& s) {
  std::string run;
  for (const auto& [id, tokens] : s.run) run += fmt::format("{}:{} ", id, tokens);
  return fmt::format("t {} ns, run {{{}}}, preempted [{}]", s.t_ns, run,
                     fmt::join(s.preempted, ","));
}

const fs::path kCases = fs::path(KVSIM_SOURCE_DIR) / "tests/conformance/vllm/cases";

std::vector<Step> read_golden(const fs::path& file) {
  std::vector<Step> steps;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    Step s;
    s.t_ns = j.at("t_ns").get<int64_t>();
    for (const auto& e : j.at("run"))
      s.run.emplace_back(e.at(0).get<int64_t>(), e.at(1).get<int64_t>());
    for (const auto& e : j.at("preempted")) s.preempted.push_back(e.get<int64_t>());
    std::sort(s.run.begin(), s.run.end());
    steps.push_back(std::move(s));
  }
  return steps;
}

// Records every batch; answers with the declared step time.
class RecordingClock final : public IterationClock {
 public:
  RecordingClock(std::vector<Step>& steps, std::vector<std::vector<int64_t>>& released,
                 FixedStepTime time)
      : steps_(steps), released_(released), time_(time) {}
  double seconds(const ClockBatch& b) override {
    Step s;
    s.t_ns = static_cast<int64_t>(std::llround(b.start_s * 1e9));
    int64_t tokens = 0;
    for (const ClockSeq& q : b.prefill) s.run.emplace_back(q.request_id, q.new_tokens);
    for (const ClockSeq& q : b.decode) s.run.emplace_back(q.request_id, q.new_tokens);
    for (const auto& [id, n] : s.run) tokens += n;
    std::sort(s.run.begin(), s.run.end());
    const int64_t seqs = static_cast<int64_t>(s.run.size());
    steps_.push_back(std::move(s));
    released_.push_back(std::move(pending_));
    pending_.clear();
    return static_cast<double>(time_.duration(tokens, seqs)) / 1e9;
  }
  void release(int64_t id) override { pending_.push_back(id); }

 private:
  std::vector<Step>& steps_;
  std::vector<std::vector<int64_t>>& released_;
  FixedStepTime time_;
  std::vector<int64_t> pending_;
};

// kvsim's steps for the case's scenario.
std::vector<Step> run_kvsim(const fs::path& scenario_file) {
  const Scenario scenario = load_scenario_file(scenario_file, Catalog::builtin());
  const ConfigNode root = ConfigNode::parse_file(scenario_file.string());
  const FixedStepTime time = parse_fixed_step_time(root.child("engine").child("step_time"));
  std::vector<Step> steps;
  std::vector<std::vector<int64_t>> released;
  RunOptions o;
  o.make_clock = [&](const ReplicaContext&) {
    return std::make_unique<RecordingClock>(steps, released, time);
  };
  run_scenario(scenario, o);
  // A request released before step k and run again at a later step was preempted at step k.
  std::map<int64_t, std::vector<size_t>> runs;  // request -> the steps that run it
  for (size_t k = 0; k < steps.size(); ++k) {
    for (const auto& e : steps[k].run) runs[e.first].push_back(k);
  }
  for (size_t k = 0; k < steps.size(); ++k) {
    for (int64_t id : released[k]) {
      const auto& at = runs[id];
      // (Later than k: a request finished by the step before k's accepted drafts, which vLLM's
      // async plan for k still schedules, is released before k and runs in k, and never again.)
      if (std::any_of(at.begin(), at.end(), [&](size_t s) { return s > k; })) {
        steps[k].preempted.push_back(id);
      }
    }
    std::sort(steps[k].preempted.begin(), steps[k].preempted.end());
  }
  return steps;
}

// The recorded cases (synchronous and async: each scenario says engine.async_scheduling).
std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kCases)) {
    const std::string name = e.path().filename().string();
    if (fs::exists(e.path() / "steps.jsonl")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("kvsim's continuous scheduler takes vLLM V1's steps on every recorded case",
          "[conformance]") {
  const std::vector<std::string> names = case_names();
  REQUIRE(names.size() >= 7);
  for (const std::string& name : names) {
    DYNAMIC_SECTION(name) {
      const std::vector<Step> want = read_golden(kCases / name / "steps.jsonl");
      const std::vector<Step> got = run_kvsim(kCases / name / "scenario.yaml");
      size_t same = 0, first = want.size();
      for (size_t k = 0; k < std::max(want.size(), got.size()); ++k) {
        const bool eq = k < want.size() && k < got.size() && want[k].t_ns == got[k].t_ns &&
                        want[k].run == got[k].run && want[k].preempted == got[k].preempted;
        if (eq)
          ++same;
        else if (first == want.size())
          first = k;
      }
      INFO(fmt::format("{}: {} of {} vLLM steps identical (kvsim ran {})", name, same, want.size(),
                       got.size()));
      if (first < want.size()) {
        INFO("first difference at step "
             << first << "\n  vLLM:  " << show(want[first])
             << "\n  kvsim: " << (first < got.size() ? show(got[first]) : "-"));
        CHECK(first == want.size());
      }
      CHECK(got.size() == want.size());
    }
  }
}

TEST_CASE("engine.step_time alone gives vLLM's steps and end time, fast-forward on and off",
          "[conformance]") {
  // Without the recording clock the engine times each step by engine.step_time itself (and
  // fast-forwards decode stretches): the same number of iterations as vLLM's steps, and the last
  // outcome at the end of vLLM's last step (its start plus the declared time of its batch).
  for (const std::string& name : case_names()) {
    DYNAMIC_SECTION(name) {
      const std::vector<Step> want = read_golden(kCases / name / "steps.jsonl");
      REQUIRE(!want.empty());
      const fs::path file = kCases / name / "scenario.yaml";
      const ConfigNode root = ConfigNode::parse_file(file.string());
      const FixedStepTime time = parse_fixed_step_time(root.child("engine").child("step_time"));
      int64_t tokens = 0;
      for (const auto& e : want.back().run) tokens += e.second;
      const int64_t end_ns =
          want.back().t_ns + time.duration(tokens, static_cast<int64_t>(want.back().run.size()));
      const Scenario scenario = load_scenario_file(file, Catalog::builtin());
      for (const bool ff : {true, false}) {
        RunOptions o;
        o.fast_forward = ff;
        const RunResult r = run_scenario(scenario, o);
        const PolicySummary& p = r.policies.at(0);
        INFO(name << (ff ? ", fast-forward" : ", stepping"));
        CHECK(p.iterations == static_cast<int64_t>(want.size()));
        // duration_s runs from the first arrival (t = 0 here) to the last outcome. (With
        // speculation under async scheduling vLLM's last step may run only requests that the
        // step before finished with its accepted drafts: then the last outcome is at its start.)
        const int64_t got_end = std::llround(p.duration_s * 1e9);
        const bool spec_async = root.child("engine").peek("speculative_config").has_value() &&
                                root.child("engine").get<bool>("async_scheduling", true);
        if (spec_async && got_end != end_ns) {
          CHECK(got_end == want.back().t_ns);
        } else {
          CHECK(got_end == end_ns);
        }
        // (Under priority a step's walk may stop before some decodes: no decode aggregate.)
        const auto policy = root.child("engine").optional_child("scheduling_policy");
        // (Nor with long_prefill_token_threshold: prefills among the decodes, in running order.)
        const auto threshold = root.child("engine").optional_child("long_prefill_token_threshold");
        // (Nor with speculative decoding: each step gains 1 + its accepted drafts.)
        const bool speculative = root.child("engine").peek("speculative_config").has_value();
        if (ff && !(policy && policy->as<std::string>() == "priority") &&
            !(threshold && threshold->as<int64_t>() > 0) && !speculative) {
          CHECK(p.fast_forward_iterations > 0);
        }
      }
    }
  }
}
