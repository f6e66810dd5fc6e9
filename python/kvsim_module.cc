// _kvsim: the C++ half of the Python module kvsim (python/kvsim/__init__.py is the other). Each
// function is a thin call into the library the CLI uses (scenario loading, run_scenario,
// run_sweep, the catalogs, kv_table, sequence_latency), so Python gets the CLI's results and
// files byte for byte. Results that the CLI prints with --json come back as that JSON text. The
// GIL is released while a scenario or sweep simulates, so Python threads run in parallel.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "core/config_node.h"
#include "core/config_patch.h"
#include "core/data_path.h"
#include "core/errors.h"
#include "core/units.h"
#include "models/attention_kind.h"
#include "models/catalog.h"
#include "models/json_fields.h"
#include "models/kv_calculator.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "sim/config/scenario.h"
#include "sim/run/arguments.h"
#include "sim/run/scenario_runner.h"
#include "sim/sweep/sweep_plan.h"
#include "sim/sweep/sweep_runner.h"

namespace py = pybind11;

namespace kvsim {
namespace {

// The scenario as the CLI would read it: a file (`is_path`), or YAML text named `source` in
// error messages.
ConfigNode parse_scenario(const std::string& text, const std::string& source, bool is_path) {
  return is_path ? ConfigNode::parse_file(text) : ConfigNode::parse_string(text, source);
}

// Keeps only the named policies, in the scenario's order. An unknown name is a ConfigError at the
// `policies:` list.
ConfigNode select_policies(const ConfigNode& raw, const std::vector<std::string>& names) {
  const ConfigNode list = raw.child("policies");
  if (!list.is_sequence()) list.fail_expected("a non-empty list of policies");
  std::set<std::string> wanted(names.begin(), names.end());
  YAML::Node kept(YAML::NodeType::Sequence);
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node p = list.at(i).yaml();
    if (p.IsMap() && p["name"] && wanted.erase(p["name"].as<std::string>())) kept.push_back(p);
  }
  if (!wanted.empty()) list.fail(fmt::format("no policy named '{}'", *wanted.begin()));
  YAML::Node tree = raw.yaml();
  tree["policies"] = kept;
  return ConfigNode::wrap(tree, raw.source());
}

struct RunArgs {
  std::string scenario;  // text or path
  std::string source;
  bool is_path = false;
  std::vector<std::string> sets;
  std::optional<std::vector<std::string>> policies;
  std::string out_dir;
  std::string timeline;
  double timeline_start_s = 0;
  std::optional<double> timeline_end_s;
  double sample_interval_s = 1.0;
  bool check_invariants = false;
};

// Thrown from a run's poll when Ctrl-C (or any signal whose Python handler raises) arrived: the
// Python error stays set on this thread, to be raised once the run has unwound.
struct Interrupted {};

// Python runs its signal handlers only when asked (and only on its main thread): a run's poll or
// a sweep's waiting thread asks here, so KeyboardInterrupt stops a long run or sweep at once.
void check_signals() {
  bool raised = false;
  {
    py::gil_scoped_acquire gil;
    raised = PyErr_CheckSignals() != 0;
  }
  if (raised) throw Interrupted{};
}

// Runs the scenario into args.out_dir: the files `kvsim run -o DIR` writes.
void run(const RunArgs& a) {
  RunOptions o;
  o.arg_front = ArgFront::kPython;
  o.out_dir = a.out_dir;
  o.sample_interval_s = a.sample_interval_s;
  o.check_invariants = a.check_invariants;
  o.timeline_path = a.timeline;
  o.timeline_start_s = a.timeline_start_s;
  if (a.timeline_end_s) o.timeline_end_s = *a.timeline_end_s;
  check_run_options(o, ArgFront::kPython);  // before the scenario: the arguments' own errors first
  ConfigNode raw = parse_scenario(a.scenario, a.source, a.is_path);
  if (a.policies) raw = select_policies(raw, *a.policies);
  const Scenario s = load_scenario_with_sets(raw, a.sets, Catalog::builtin());
  // The engine asks every few thousand events, so KeyboardInterrupt stops a long run at once, as
  // --max-wall-s does (but writing nothing).
  o.interrupt_check = check_signals;
  try {
    py::gil_scoped_release release;
    run_scenario(s, o);
  } catch (const Interrupted&) {
    throw py::error_already_set();  // the KeyboardInterrupt PyErr_CheckSignals left set
  }
}

// Runs a sweep's points into out_dir on `jobs` threads: the files `kvsim sweep -o DIR` writes.
void sweep(const std::string& scenario, const std::string& source, bool is_path,
           const std::vector<std::string>& sets, const std::string& out_dir, int jobs) {
  ConfigNode raw = parse_scenario(scenario, source, is_path);
  if (!sets.empty()) {  // as `kvsim sweep --set`
    YAML::Node patched = raw.yaml();
    for (const auto& s : sets) apply_set_in_place(patched, s);
    raw = ConfigNode::wrap_with_sets(patched, raw.source(), sets);
  }
  check_arg(args::kJobs, jobs, ArgFront::kPython);
  const SweepPlan plan = expand_sweep(raw);
  SweepOptions o;
  o.out_dir = out_dir;
  o.jobs = jobs;
  o.run.arg_front = ArgFront::kPython;
  // Asked by run_sweep's own thread (this one) while the points run on workers: Ctrl-C abandons
  // the sweep, the running points writing nothing (the finished ones stay for a resume).
  o.interrupt_check = check_signals;
  try {
    py::gil_scoped_release release;
    run_sweep(plan, Catalog::builtin(), o);
  } catch (const Interrupted&) {
    throw py::error_already_set();  // the KeyboardInterrupt PyErr_CheckSignals left set
  }
}

std::string models_json() {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& entry : Catalog::builtin().models()) arr.push_back(to_json(entry.second));
  return arr.dump();
}

std::string gpus_json() {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& entry : Catalog::builtin().gpus()) arr.push_back(to_json(entry.second));
  return arr.dump();
}

// `kvsim kv --json` for a catalog model (its own KV heads and dtype).
std::string kv_json(const std::string& model, const std::vector<int64_t>& seqs, int64_t batch,
                    const std::optional<std::string>& gpu, std::optional<double> capacity_gb,
                    std::optional<double> weights_gb) {
  for (int64_t s : seqs) check_arg(args::kKvSeq, static_cast<double>(s), ArgFront::kPython);
  check_arg(args::kKvBatch, static_cast<double>(batch), ArgFront::kPython);
  if (capacity_gb) check_arg(args::kCapacityGb, *capacity_gb, ArgFront::kPython);
  if (weights_gb) check_arg(args::kWeightsGb, *weights_gb, ArgFront::kPython);
  const Catalog& catalog = Catalog::builtin();
  KvQuery q;
  q.model = catalog.model(model);
  q.seq_lens = seqs;
  q.batch = batch;
  if (gpu) q.capacity_bytes = catalog.gpu(*gpu).memory_bytes;
  if (capacity_gb) q.capacity_bytes = gb_to_bytes(*capacity_gb);
  q.weights_bytes = weights_gb ? gb_to_bytes(*weights_gb) : q.model.weights_bytes();
  return to_json_array(kv_table(q)).dump();
}

// `kvsim latency --json` with the built-in profile of the GPU.
std::string latency_json(const std::string& model, const std::string& gpu,
                         const std::vector<int64_t>& seqs, const std::vector<int64_t>& batches,
                         const std::string& attention, int block_size, int tp, int pp,
                         bool verbose) {
  for (int64_t s : seqs) check_arg(args::kLatencySeq, static_cast<double>(s), ArgFront::kPython);
  for (int64_t b : batches)
    check_arg(args::kLatencyBatch, static_cast<double>(b), ArgFront::kPython);
  check_arg(args::kBlockSize, block_size, ArgFront::kPython);
  check_arg(args::kTensorParallel, tp, ArgFront::kPython);
  check_arg(args::kPipelineParallel, pp, ArgFront::kPython);
  const Catalog& catalog = Catalog::builtin();
  const GpuSpec& g = catalog.gpu(gpu);
  const LatencyModel lm(catalog.model(model), g, default_profile(g),
                        parse_attention_kind(attention), tp, pp);
  std::vector<SequenceLatency> rows;
  for (int64_t s : seqs) {
    for (int64_t b : batches) rows.push_back(sequence_latency(lm, s, b, block_size));
  }
  return to_json_array(rows, verbose).dump();
}

}  // namespace
}  // namespace kvsim

PYBIND11_MODULE(_kvsim, m) {
  using namespace kvsim;
  m.doc() = "kvsim's C++ core; use the package kvsim (kvsim.run, kvsim.sweep, ...)";
  // As the CLI logs: to stderr (stdout is the notebook's), at its default level, warn (the
  // engine's per-OOM info lines stay quiet).
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("kvsim", sink);
  logger->set_pattern("[%l] %n: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::warn);
  m.def(
      "set_log_level",
      [](const std::string& level) { spdlog::set_level(spdlog::level::from_str(level)); },
      py::arg("level"));
  // Python's hierarchy mirrors C++'s: ConfigError (file:line:col) is an InputError.
  static py::exception<InputError> input_error(m, "InputError");
  static py::exception<ConfigError> config_error(m, "ConfigError", input_error.ptr());
  static py::exception<InvariantError> invariant_error(m, "InvariantError");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      config_error(e.what());
    } catch (const InputError& e) {
      input_error(e.what());
    } catch (const InvariantError& e) {
      invariant_error(e.what());
    }
  });

  m.def("version", [] { return std::string(kvsim_version()); });
  m.def("data_dir", [] { return data_dir().string(); });
  m.def(
      "run",
      [](const std::string& scenario, const std::string& source, bool is_path,
         const std::vector<std::string>& sets, std::optional<std::vector<std::string>> policies,
         const std::string& out_dir, const std::string& timeline, double timeline_start_s,
         std::optional<double> timeline_end_s, double sample_interval_s, bool check_invariants) {
        run(RunArgs{.scenario = scenario,
                    .source = source,
                    .is_path = is_path,
                    .sets = sets,
                    .policies = std::move(policies),
                    .out_dir = out_dir,
                    .timeline = timeline,
                    .timeline_start_s = timeline_start_s,
                    .timeline_end_s = timeline_end_s,
                    .sample_interval_s = sample_interval_s,
                    .check_invariants = check_invariants});
      },
      py::arg("scenario"), py::arg("source"), py::arg("is_path"), py::arg("sets"),
      py::arg("policies"), py::arg("out_dir"), py::arg("timeline") = "",
      py::arg("timeline_start_s") = 0.0, py::arg("timeline_end_s") = py::none(),
      py::arg("sample_interval_s") = 1.0, py::arg("check_invariants") = false);
  m.def("sweep", &sweep, py::arg("scenario"), py::arg("source"), py::arg("is_path"),
        py::arg("sets"), py::arg("out_dir"), py::arg("jobs"));
  m.def("models_json", &models_json);
  m.def("gpus_json", &gpus_json);
  m.def("kv_json", &kv_json, py::arg("model"), py::arg("seqs"), py::arg("batch"), py::arg("gpu"),
        py::arg("capacity_gb"), py::arg("weights_gb"));
  m.def("latency_json", &latency_json, py::arg("model"), py::arg("gpu"), py::arg("seqs"),
        py::arg("batches"), py::arg("attention"), py::arg("block_size"), py::arg("tp"),
        py::arg("pp"), py::arg("verbose"));
}
