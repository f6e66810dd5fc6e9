#include "apps/kvsim/plot_data.h"

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

}  // namespace kvsim::cli
