#include "apps/kvsim/plot_data.h"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "apps/kvsim/commands.h"
#include "core/atomic_file.h"
#include "core/errors.h"

namespace kvsim::cli {

void check_figure_name(const std::string& figure) {
  const std::string ext = std::filesystem::path(figure).extension().string();
  if (ext != ".png" && ext != ".svg" && ext != ".pdf") {
    throw InputError(fmt::format("--plot {}: expected a .png, .svg or .pdf file name", figure));
  }
}

void plot_data(const std::string& kind, const nlohmann::ordered_json& data,
               const std::string& figure, bool quiet) {
  check_figure_name(figure);
  const std::string json_path = std::filesystem::path(figure).replace_extension(".json").string();
  write_file_atomic(json_path, data.dump(2) + "\n");
  std::vector<std::string> args = {"--kind", kind, "--data", json_path, "-o", figure};
  if (quiet) args.push_back("--quiet");
  run_data_script(kPlotScript, args);
}

void JsonPlotOptions::check() const {
  if (!plot.empty()) check_figure_name(plot);
}

void JsonPlotOptions::plot_if_asked(const std::string& kind,
                                    const std::function<nlohmann::ordered_json()>& data) const {
  if (!plot.empty()) plot_data(kind, data(), plot, json);
}

void add_json_plot_options(CLI::App& cmd, JsonPlotOptions& o, const std::string& json_help,
                           const std::string& plot_what) {
  cmd.add_flag("--json", o.json, json_help);
  cmd.add_option("--plot", o.plot,
                 "also draw " + plot_what +
                     " into FILE (.png/.svg/.pdf; data beside it as .json; needs matplotlib)");
}

}  // namespace kvsim::cli
