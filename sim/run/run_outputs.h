// The files of a finished run in its folder (RunOptions::out_dir): requests.csv and
// timeseries.csv (streamed while it ran) and the caller's extra files renamed into place, then
// summary.csv, summary.json and manifest.json, the manifest last (it marks the folder complete).
#pragma once

#include "core/atomic_file.h"
#include "sim/run/scenario_runner.h"

namespace kvsim {

void write_run_outputs(const PreparedScenario& prepared, const RunResult& result,
                       const RunOptions& o, AtomicFile& requests_file, AtomicFile& timeseries_file);

}  // namespace kvsim
