// Helpers of the engine tests: run a scenario given as YAML text, the input error of one,
// count outcomes, an iteration's time as the engine takes it, a fresh temporary folder, a result
// file's bytes.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "sim/config/scenario.h"
#include "sim/metrics/recorder.h"
#include "sim/request/outcome.h"
#include "sim/run/scenario_runner.h"

namespace kvsim::test {

inline RunResult run_yaml(const std::string& yaml, bool check = true) {
  const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
  RunOptions o;
  o.check_invariants = check;
  o.sample_interval_s = 0.5;
  return run_scenario(s, o);
}

// The message of the InputError that loading and preparing a scenario given as YAML text (named
// bad.yaml) raises, or "no error". Preparing builds every policy's engine and the cluster, so it
// finds what loading alone does not.
inline std::string prepare_error(const std::string& yaml) {
  try {
    const Scenario s =
        load_scenario(ConfigNode::parse_string(yaml, "bad.yaml"), Catalog::builtin());
    prepare_scenario(s, RunOptions{});
  } catch (const InputError& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

inline int64_t count(const PolicySummary& p, Outcome o) { return p.outcomes[outcome_index(o)]; }

// The engine's time for an iteration of shape `s`: the latency model's seconds rounded to the
// clock's ns, at least 1 (a decode-only step's DecodeStepFixed gives the same ns but at a tie).
inline SimTime iteration_ns(const LatencyModel& m, const BatchShape& s) {
  return std::max<SimTime>(1, seconds_to_sim(m.iteration(s).seconds));
}

// An empty folder kvsim-NAME-PID under the temporary directory (emptied if it was there).
inline std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / fmt::format("kvsim-{}-{}", name, ::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// One row of a Mooncake trace: arrival in ms and the first of its consecutive hash ids.
struct MooncakeRow {
  int timestamp_ms;
  int first_hash;
};

// Writes a Mooncake trace (`format: mooncake`) of one-token outputs: every row has
// `input_length` tokens and `blocks` consecutive hash ids from its first, so rows with the same
// first id share their whole prefix.
inline void write_mooncake_trace(const std::filesystem::path& path, int input_length, int blocks,
                                 std::initializer_list<MooncakeRow> rows) {
  std::ofstream out(path);
  for (const MooncakeRow& r : rows) {
    out << fmt::format(
        R"({{"timestamp": {}, "input_length": {}, "output_length": 1, "hash_ids": [)",
        r.timestamp_ms, input_length);
    for (int i = 0; i < blocks; ++i) out << (i ? ", " : "") << r.first_hash + i;
    out << "]}\n";
  }
}

// A file's bytes.
inline std::string file_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream b;
  b << in.rdbuf();
  return b.str();
}

// A hand-worked fast-forward case's run in one engine mode: `s` into `dir`, with fast-forward on
// or off, sampled every `sample_interval_s` (by default too seldom for a sample inside a stretch).
inline RunResult run_mode(const Scenario& s, const std::filesystem::path& dir, bool fast_forward,
                          double sample_interval_s = 1000) {
  RunOptions o;
  o.out_dir = dir.string();
  o.fast_forward = fast_forward;
  o.sample_interval_s = sample_interval_s;
  return run_scenario(s, o);
}

// The result files both modes must write alike, concatenated: summary.json, requests.csv and
// timeseries.csv of a run's folder.
inline std::string result_files(const std::filesystem::path& dir) {
  return file_text(dir / "summary.json") + file_text(dir / "requests.csv") +
         file_text(dir / "timeseries.csv");
}

// Every file of a run's folder, each after its name: what two runs that must be identical compare.
inline std::string all_result_files(const std::filesystem::path& dir) {
  std::string all;
  for (const char* f :
       {"summary.json", "summary.csv", "requests.csv", "timeseries.csv", "manifest.json"}) {
    all += std::string(f) + "\n" + file_text(dir / f);
  }
  return all;
}

// The random identity tests' check: `s` runs with the fast-forward into base/ff and stepping into
// base/step, sampled every 0.37 s so that samples fall inside would-be stretches; both run the
// same iterations, stepping none in closed form, and write the same bytes. Removes `base`.
inline void check_modes_write_identical_files(const Scenario& s,
                                              const std::filesystem::path& base) {
  RunOptions o;
  o.sample_interval_s = 0.37;
  o.out_dir = (base / "ff").string();
  const RunResult ff = run_scenario(s, o);
  o.out_dir = (base / "step").string();
  o.fast_forward = false;
  const RunResult step = run_scenario(s, o);
  CHECK(ff.policies.at(0).iterations == step.policies.at(0).iterations);
  CHECK(step.policies.at(0).fast_forward_iterations == 0);
  const std::string a = all_result_files(base / "ff"), b = all_result_files(base / "step");
  CHECK(a.size() > 500);
  CHECK(a == b);
  std::filesystem::remove_all(base);
}

// A hand-worked fast-forward case in both engine modes: `s` runs with fast-forward into
// base / (prefix + "ff"), then stepping into base / (prefix + "step"), each followed by
// check(fast_forward, its policy's summary, its folder) under an INFO naming the mode; then the
// two modes' result files must be the same bytes.
template <typename Check>
void in_both_modes(const Scenario& s, const std::filesystem::path& base, Check check,
                   double sample_interval_s = 1000, const std::string& prefix = "") {
  std::string files[2];
  for (int mode = 0; mode < 2; ++mode) {
    const bool ff = mode == 0;
    INFO("mode " << (ff ? "fast-forward" : "stepping"));
    const std::filesystem::path dir = base / (prefix + (ff ? "ff" : "step"));
    const RunResult r = run_mode(s, dir, ff, sample_interval_s);
    check(ff, r.policies.at(0), dir);
    files[mode] = result_files(dir);
  }
  CHECK(files[0] == files[1]);
}

// A GPU on which one 16k-token request of seed-7b-mha fits beside the 16 GB of weights but two
// do not: 32 GB - 16 GB weights - 0.5 GiB workspace leaves ~15.5 GB; each request holds
// (16384 + 16) x 524,288 B = 8.6 GB.
inline const char* kSmallGpu = "{name: small, memory_gb: 32, hbm_gb_per_s: 2000, fp16_tflops: 312}";

}  // namespace kvsim::test
