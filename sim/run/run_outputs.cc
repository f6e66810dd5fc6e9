#include "sim/run/run_outputs.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/data_path.h"
#include "sim/metrics/summary_writer.h"

namespace kvsim {

void write_run_outputs(const PreparedScenario& prepared, const RunResult& result,
                       const RunOptions& o, AtomicFile& requests_file,
                       AtomicFile& timeseries_file) {
  const std::filesystem::path dir = o.out_dir;
  const Scenario& s = prepared.scenario();
  nlohmann::ordered_json manifest;
  manifest["kvsim_version"] = kvsim_version();
  manifest["scenario_name"] = s.name;
  manifest["scenario_source"] = s.root.source();
  manifest["scenario_hash"] = result.scenario_hash;
  manifest["seed"] = s.seed;
  manifest["model"] = s.model.name;
  manifest["gpu"] = s.gpu.name;
  manifest["resolved_scenario"] = prepared.resolved_text();
  manifest["files"] = {"summary.json", "summary.csv", "requests.csv", "timeseries.csv"};
  for (const auto& [name, file] : o.extra_files) manifest["files"].push_back(name);
  if (o.marks.is_object()) {
    for (const auto& [key, value] : o.marks.items()) manifest[key] = value;
  }
  // Policies on more than one GPU (a replica's TP x PP, summed over a cluster's replicas): only
  // then, so single-GPU manifests keep their bytes. Memory figures are per GPU when a replica
  // spans GPUs.
  nlohmann::ordered_json gpus;
  bool per_gpu = false;
  for (const PolicySummary& p : result.policies) {
    if (p.gpus > 1) gpus[p.name] = p.gpus;
    per_gpu = per_gpu || (p.gpu_layout && p.gpu_layout->gpus > 1);
  }
  if (per_gpu) manifest["memory_figures"] = "per GPU";
  if (!gpus.empty()) manifest["gpus_per_policy"] = gpus;
  // A re-run into a finished folder: the old manifest goes before the first new file lands, so a
  // run stopped among the renames below leaves a folder without a manifest (unfinished), never
  // new files under the old run's manifest.
  std::error_code no_manifest;
  std::filesystem::remove(dir / "manifest.json", no_manifest);
  requests_file.commit();
  timeseries_file.commit();
  for (const auto& [name, file] : o.extra_files) file->commit();
  write_file_atomic(dir / "summary.csv", summary_csv(result.policies));
  auto summary = summary_json(result.policies);
  summary["scenario_hash"] = result.scenario_hash;
  if (result.trace) {  // only here, so other workloads' summaries keep their bytes
    const TraceCounters& t = *result.trace;
    summary["trace"] = {{"rows_read", t.rows_read},
                        {"requests", t.requests},
                        {"skipped_bad_rows", t.skipped_bad_rows},
                        {"outside_window", t.outside_window},
                        {"clipped_prompt", t.clipped_prompt},
                        {"clipped_output", t.clipped_output}};
  }
  if (o.marks.is_object()) {
    for (const auto& [key, value] : o.marks.items()) summary[key] = value;
  }
  write_file_atomic(dir / "summary.json", summary.dump(2) + "\n");
  write_file_atomic(dir / "manifest.json", manifest.dump(2) + "\n");  // last: marks completion
}

}  // namespace kvsim
