#include "validate/vllm_run/vllm_run.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "models/latency/profile.h"
#include "sim/config/scenario.h"
#include "sim/run/scenario_runner.h"
#include "validate/replay/e2e_plot.h"
#include "validate/scratch_folder.h"
#include "validate/vllm_run/measured_run.h"
#include "validate/vllm_run/serving_metrics.h"
#include "validate/vllm_run/vllm_engine.h"

namespace kvsim::validate {

namespace {

// The headline figures: what the maximum |error| is taken over.
bool headline(const std::string& m) {
  return m == "ttft_mean_s" || m == "ttft_p50_s" || m == "ttft_p99_s" || m == "tpot_mean_s" ||
         m == "tpot_p50_s" || m == "tpot_p99_s" || m == "e2e_mean_s" || m == "e2e_p99_s";
}

// LLMServingSim's own prediction of the run, when its validation summary lies in the run folder
// (lines "TTFT Mean   7097.2   6815.7   -4.0%": vLLM, simulator, difference; milliseconds).
nlohmann::ordered_json llmservingsim_summary(const std::filesystem::path& dir) {
  const auto file = dir / "llmservingsim-validation-summary.txt";
  std::ifstream in(file);
  if (!in) return nullptr;
  const std::map<std::string, std::string> names = {
      {"TTFT Mean", "ttft_mean_s"}, {"TTFT Median", "ttft_p50_s"},  {"TTFT P90", "ttft_p90_s"},
      {"TTFT P99", "ttft_p99_s"},   {"TPOT Mean", "tpot_mean_s"},   {"TPOT Median", "tpot_p50_s"},
      {"TPOT P99", "tpot_p99_s"},   {"Latency Mean", "e2e_mean_s"}, {"Latency P99", "e2e_p99_s"}};
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  std::string line;
  while (std::getline(in, line)) {
    for (const auto& [label, key] : names) {
      if (line.rfind(label, 0) != 0) continue;
      std::istringstream s(line.substr(label.size()));
      double vllm = 0, sim = 0;
      std::string diff;
      if (s >> vllm >> sim >> diff) {
        // The printed difference (from unrounded figures); else from the rounded columns.
        double pct = 100.0 * (sim - vllm) / vllm;
        try {
          pct = std::stod(diff);
        } catch (const std::logic_error&) {
        }
        if (!std::isfinite(vllm) || !std::isfinite(sim)) continue;
        const nlohmann::ordered_json err =
            std::isfinite(pct) ? nlohmann::ordered_json(pct) : nullptr;
        out[key] = {{"measured", vllm * 1e-3}, {"simulated", sim * 1e-3}, {"error_pct", err}};
      }
    }
  }
  return out.empty() ? nlohmann::ordered_json(nullptr) : out;
}

std::string fmt_value(const std::string& metric, double v) {
  if (metric.find("throughput") != std::string::npos) return fmt::format("{:.2f}", v);
  return fmt::format("{:.1f} ms", v * 1e3);
}

// "+12.3%", or "n/a" where there is no error to show (a measured figure of 0).
std::string percent_cell(const nlohmann::ordered_json& pct) {
  if (!pct.is_number() || !std::isfinite(pct.get<double>())) return "n/a";
  return fmt::format("{:+.1f}%", pct.get<double>());
}

// OUT must be a folder or not exist yet, under folders (a regular file on the way is refused
// here, not met by create_directories' system error half-way through).
void check_output_folder(const std::filesystem::path& out) {
  std::error_code ec;
  for (std::filesystem::path p = out; !p.empty(); p = p.parent_path()) {
    if (std::filesystem::exists(p, ec)) {
      if (!std::filesystem::is_directory(p, ec)) {
        throw InputError(fmt::format("{}: -o: {} is not a folder", out.string(), p.string()));
      }
      return;
    }
    if (p == p.parent_path()) return;
  }
}

}  // namespace

double run_vllm_run(const VllmRunOptions& o) {
  const MeasuredRun run = read_measured_run(o.run);
  const Catalog& catalog = Catalog::builtin();
  const GpuSpec& gpu = catalog.gpu(o.gpu);
  std::string model = o.model;
  if (model.empty()) {
    model = catalog_model_for(run.engine.model);
    if (model.empty()) {
      throw InputError(
          fmt::format("{}: model '{}' is not in the catalog; pass --model CONFIG.json "
                      "(its Hugging Face config.json)",
                      run.source.string(), run.engine.model));
    }
  } else if (catalog.models().count(model) == 0) {
    model = std::filesystem::absolute(model).string();
  }
  const std::filesystem::path out = std::filesystem::absolute(o.out_dir);
  check_output_folder(out);

  VllmScenarioInputs in;
  in.engine = run.engine;
  in.model = model;
  in.gpu = gpu.name;
  in.trace = out / "trace.csv";

  // The requests as a normalized trace: arrivals relative to the first, lengths as served.
  std::string trace = "arrival_s,prompt_tokens,output_tokens\n";
  std::string measured_csv = "id,arrival_s,prompt_tokens,output_tokens,ttft_s,tpot_s,e2e_s\n";
  std::vector<ServedRequest> measured;
  for (const MeasuredRequest& r : run.requests) {
    trace += fmt::format("{:.9f},{},{}\n", r.arrival_s, r.input_tokens, r.output_tokens);
    measured_csv += fmt::format("{},{:.9f},{},{},{:.9f},{},{:.9f}\n", r.id, r.arrival_s,
                                r.input_tokens, r.output_tokens, r.ttft_s,
                                r.tpot_s ? fmt::format("{:.9f}", *r.tpot_s) : "", r.e2e_s);
    measured.push_back({r.arrival_s, r.output_tokens, r.ttft_s, r.e2e_s, r.tpot_s});
  }
  if (!o.profile.empty()) in.profile = std::filesystem::absolute(o.profile);
  in.p2p = o.p2p;
  in.moe = load_model(model, catalog).moe();
  // Everything that can be refused is checked before the first file in OUT is written: the
  // scenario as it will be written, set up as `kvsim check` does (its trace a scratch copy).
  // meta.json's values were checked at their own positions; this catches what kvsim cannot run.
  {
    const ScratchFolder check(std::filesystem::temp_directory_path() /
                              fmt::format("kvsim-vllm-run-check.{}", ::getpid()));
    write_file_atomic(check.path() / "trace.csv", trace);
    VllmScenarioInputs checked = in;
    checked.trace = check.path() / "trace.csv";
    const Scenario scenario =
        load_scenario(ConfigNode::parse_string(vllm_scenario_yaml(checked, gpu),
                                               (out / "scenario.yaml").string()),
                      catalog);
    (void)prepare_scenario(scenario, RunOptions{});
  }
  // The old result's completion marks go first (kvsim's manifest.json; e2e.json, which this
  // command writes last): a run stopped part-way never leaves new files under an old manifest.
  for (const char* done : {"manifest.json", "e2e.json", "e2e.txt", "e2e.png"}) {
    std::error_code ec;
    std::filesystem::remove(out / done, ec);
  }
  write_file_atomic(out / "trace.csv", trace);
  write_file_atomic(out / "measured_requests.csv", measured_csv);
  if (run.timeseries) {
    std::ifstream ts(*run.timeseries, std::ios::binary);
    std::stringstream s;
    s << ts.rdbuf();
    write_file_atomic(out / "measured_timeseries.csv", s.str());
  }

  const ServingMetrics m = serving_metrics(measured);

  // Runs kvsim on the run into `dir` with `in`'s profile; the completed requests.
  RunResult result;
  auto simulate = [&](const std::filesystem::path& dir) {
    write_file_atomic(dir / "scenario.yaml", vllm_scenario_yaml(in, gpu));
    const Scenario scenario = load_scenario_file(dir / "scenario.yaml", catalog);
    RunOptions ro;
    ro.out_dir = dir.string();
    ro.marks = {{"vllm_run", {{"source", run.source.string()}, {"format", run.format}}}};
    result = run_scenario(scenario, ro);
    std::vector<ServedRequest> done = read_kvsim_requests(dir / "requests.csv");
    if (done.empty()) {
      throw InputError(fmt::format("{}: kvsim completed none of the {} requests (see summary.json)",
                                   (dir / "requests.csv").string(), measured.size()));
    }
    return done;
  };

  // --fit-step-overhead: the one constant fitted to the run. The per-step host overhead added to
  // the profile's iteration_us so that kvsim's mean TPOT (its iteration pace under load) equals
  // the server's; bisection over [0, 20 ms] to 1 us (TPOT grows with it).
  nlohmann::ordered_json fit_record = nullptr;
  if (o.fit_step_overhead) {
    const Profile base = o.profile.empty() ? default_profile(gpu) : load_profile(o.profile);
    const double target = m[4].second;  // tpot_mean_s
    const ScratchFolder scratch(out / "step-overhead-fit");
    const auto& fit_dir = scratch.path();
    int steps = 0;
    auto tpot_at = [&](double added_s) {
      Profile p = base;
      p.iteration_overhead_s = base.iteration_overhead_s + added_s;
      write_file_atomic(fit_dir / "profile.yaml", write_profile_yaml(p));
      in.profile = fit_dir / "profile.yaml";
      ++steps;
      return serving_metrics(simulate(fit_dir))[4].second;
    };
    double lo = 0, hi = 20e-3;
    if (tpot_at(lo) >= target) {
      hi = 0;
    } else {
      while (hi - lo > 1e-6) {
        const double mid = 0.5 * (lo + hi);
        (tpot_at(mid) < target ? lo : hi) = mid;
      }
    }
    Profile fitted = base;
    fitted.iteration_overhead_s = base.iteration_overhead_s + hi;
    fitted.overheads_source = fmt::format(
        "{}; plus {:.0f} us per step fitted by kvsim-validate vllm-run --fit-step-overhead so "
        "that kvsim's mean TPOT equals {}'s ({:.2f} ms)",
        base.overheads_source, hi * 1e6, run.source.filename().string(), target * 1e3);
    write_file_atomic(out / "profile-fitted.yaml", write_profile_yaml(fitted));
    in.profile = out / "profile-fitted.yaml";
    fit_record = {{"fitted_to", "tpot_mean_s"},
                  {"added_iteration_us", hi * 1e6},
                  {"iteration_us", fitted.iteration_overhead_s * 1e6},
                  {"runs", steps},
                  {"profile", (out / "profile-fitted.yaml").string()}};
  }
  const std::vector<ServedRequest> simulated = simulate(out);
  const ServingMetrics s = serving_metrics(simulated);
  const nlohmann::ordered_json lss = run.format == "vllm-run" ? llmservingsim_summary(run.source)
                                                              : nlohmann::ordered_json(nullptr);

  nlohmann::ordered_json j;
  j["tool"] = "kvsim-validate vllm-run";
  j["run"] = {{"source", run.source.string()},
              {"format", run.format},
              {"model", run.engine.model},
              {"vllm_version", run.engine.vllm_version},
              {"engine_from_meta", run.engine_from_meta},
              {"requests", run.requests.size()},
              {"skipped_failed", run.skipped_failed}};
  j["kvsim"] = {
      {"model", model},
      {"gpu", gpu.name},
      {"profile", in.profile.empty() ? std::string("built-in") : in.profile.string()},
      {"requests_completed", simulated.size()},
      {"preemptions", result.policies.empty() ? 0 : result.policies.front().preemptions},
      {"kv_pool_bytes", result.policies.empty() ? 0 : result.policies.front().kv_pool_bytes}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  double worst = 0;
  std::string table =
      fmt::format("{:<26} {:>12} {:>12} {:>8}", "metric", "measured", "kvsim", "error");
  if (!lss.is_null()) table += fmt::format(" {:>14}", "LLMServingSim");
  table += "\n";
  for (size_t i = 0; i < m.size(); ++i) {
    const auto& [name, mv] = m[i];
    const double sv = s[i].second;
    // A measured figure of 0 has no relative error (n/a, null in e2e.json), not 0%.
    const std::optional<double> err =
        mv > 0 ? std::optional<double>(100.0 * (sv - mv) / mv) : std::nullopt;
    nlohmann::ordered_json r = {{"metric", name},
                                {"measured", mv},
                                {"simulated", sv},
                                {"error_pct", err ? nlohmann::ordered_json(*err) : nullptr}};
    std::string lss_cell;
    if (!lss.is_null() && lss.contains(name)) {
      r["llmservingsim_error_pct"] = lss[name]["error_pct"];
      lss_cell = fmt::format(" {:>14}", percent_cell(lss[name]["error_pct"]));
    }
    rows.push_back(r);
    if (headline(name) && err) worst = std::max(worst, std::abs(*err));
    table += fmt::format("{:<26} {:>12} {:>12} {:>8}{}\n", name, fmt_value(name, mv),
                         fmt_value(name, sv),
                         percent_cell(err ? nlohmann::ordered_json(*err) : nullptr), lss_cell);
  }
  j["metrics"] = rows;
  if (!fit_record.is_null()) j["step_overhead_fit"] = fit_record;
  j["worst_headline_error_pct"] = worst;
  if (!lss.is_null()) j["llmservingsim"] = lss;
  write_file_atomic(out / "e2e.json", j.dump(2) + "\n");
  const std::string caption = fmt::format(
      "kvsim-validate vllm-run {} on {}: {} requests measured, {} completed in kvsim; errors are "
      "(kvsim - measured) / measured\n{}worst headline |error|: {:.1f}%\n",
      run.engine.model, gpu.name, measured.size(), simulated.size(), table, worst);
  write_file_atomic(out / "e2e.txt", caption);
  if (!o.quiet) fmt::print("{}", caption);
  if (o.plot) render_e2e_figure(out);
  return worst;
}

}  // namespace kvsim::validate
