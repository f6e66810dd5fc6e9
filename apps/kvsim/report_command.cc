// `kvsim report DIR [-o FILE]`: one self-contained HTML page (figures embedded, summary tables,
// the scenario, kvsim's version) made by scripts/kvsim_report.py, readable offline.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "apps/kvsim/commands.h"
#include "core/data_path.h"

namespace kvsim::cli {

void add_report_command(CLI::App& app) {
  struct Options {
    std::string dir, out;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "report", "write a self-contained HTML report of a run, sweep or kvsim-validate folder");
  cmd->add_option("dir", o->dir, "result folder")->required();
  cmd->add_option("-o,--out", o->out, "the HTML file (default DIR/report.html)");
  cmd->callback([o] {
    // The version comes from the binary: the report says which kvsim rendered it.
    std::vector<std::string> args = {o->dir, "--kvsim-version", kvsim_version()};
    if (!o->out.empty()) args.insert(args.end(), {"-o", o->out});
    run_data_script("kvsim_report.py", args);
  });
}

}  // namespace kvsim::cli
