// `--json` and `--plot FIG` of the calculator commands (kv, latency, plausibility): with --plot,
// the numbers the command already computed go to FIG's name with .json beside FIG, and
// scripts/kvsim_plot --kind draws the figure from that file alone, so it can be re-rendered (or
// restyled) without kvsim.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace CLI {
class App;
}

namespace kvsim::cli {

// The two output options every calculator command has.
struct JsonPlotOptions {
  bool json = false;  // --json: stdout is one JSON document
  std::string plot;   // --plot FIG: also draw FIG

  // Throws InputError when --plot names anything but a .png, .svg or .pdf file; call it before
  // any work.
  void check() const;
  // With --plot, draws `kind` from data() (see plot_data; quiet under --json); else does nothing.
  void plot_if_asked(const std::string& kind,
                     const std::function<nlohmann::ordered_json()>& data) const;
};

// Adds --json (help: json_help) and --plot FILE (help: "also draw <plot_what> into FILE ...") to
// cmd, stored in o (which must outlive cmd's callback).
void add_json_plot_options(CLI::App& cmd, JsonPlotOptions& o, const std::string& json_help,
                           const std::string& plot_what);

// Throws InputError unless `figure` ends in .png, .svg or .pdf (checked before any work).
void check_figure_name(const std::string& figure);

// Writes `data` (which must carry "kind": kind) to <figure without extension>.json and renders
// `figure` from it; `quiet` keeps the script's one-line notice off stdout (for --json output).
void plot_data(const std::string& kind, const nlohmann::ordered_json& data,
               const std::string& figure, bool quiet);

}  // namespace kvsim::cli
