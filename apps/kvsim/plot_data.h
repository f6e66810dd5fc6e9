// `--plot FIG` of the calculator commands (kv, latency, plausibility): the numbers the command
// already computed go to FIG's name with .json beside FIG, and scripts/kvsim_plot --kind draws
// the figure from that file alone, so it can be re-rendered (or restyled) without kvsim.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kvsim::cli {

// Throws InputError unless `figure` ends in .png, .svg or .pdf (checked before any work).
void check_figure_name(const std::string& figure);

// Writes `data` (which must carry "kind": kind) to <figure without extension>.json and renders
// `figure` from it; `quiet` keeps the script's one-line notice off stdout (for --json output).
void plot_data(const std::string& kind, const nlohmann::ordered_json& data,
               const std::string& figure, bool quiet);

}  // namespace kvsim::cli
