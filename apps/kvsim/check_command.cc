// `kvsim check SCENARIO.yaml`: load and validate a scenario; print lints as warnings.
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include "models/catalog.h"
#include "apps/kvsim/commands.h"
#include "sim/config/scenario.h"
#include "sim/run/scenario_runner.h"

namespace kvsim::cli {

void add_check_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("check", "validate a scenario file and print lints as warnings");
  cmd->add_option("scenario", *path, "scenario YAML file")->required();
  cmd->callback([path] {
    const Scenario s = load_scenario_file(*path, Catalog::builtin());
    prepare_scenario(s, RunOptions{});  // every error a run would find, without simulating
    const auto lints = lint_scenario(s);
    for (const auto& l : lints) fmt::print(stderr, "warning: {}\n", l);
    fmt::print("{}: ok (scenario '{}', model {}, gpu {}, {} warning{})\n", *path, s.name,
               s.model.name, s.gpu.name, lints.size(), lints.size() == 1 ? "" : "s");
  });
}

}  // namespace kvsim::cli
