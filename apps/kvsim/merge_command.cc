// `kvsim merge DIR... [-o OUT]`: joins the folders of a sharded sweep (`kvsim sweep --shard i/n`,
// e.g. one Slurm array task each, into separate folders or one shared folder) into the
// summary.csv an unsharded run writes, byte for byte.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "apps/kvsim/commands.h"
#include "core/atomic_file.h"
#include "sim/sweep/sweep_runner.h"

namespace kvsim::cli {

void add_merge_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> dirs;
    std::string out;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("merge", "join sharded sweep folders into one summary.csv");
  cmd->add_option("dirs", a->dirs, "sweep folders (written by `kvsim sweep --shard`)")->required();
  cmd->add_option("-o,--out", a->out, "folder for summary.csv (default: the first folder)");
  cmd->callback([a] {
    std::vector<std::filesystem::path> dirs(a->dirs.begin(), a->dirs.end());
    const std::filesystem::path out = a->out.empty() ? dirs.front() : std::filesystem::path(a->out);
    write_sweep_summary_csv(dirs, out / "summary.csv");
    fmt::print("merged {} folder(s): {}\n", dirs.size(), (out / "summary.csv").string());
  });
}

}  // namespace kvsim::cli
