// `kvsim check SCENARIO.yaml [--set key=value ...]`: load and validate a scenario (with the same
// --set overrides `run` takes, so a patched scenario can be checked before it runs); print lints
// as warnings.
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include "apps/kvsim/commands.h"
#include "core/config_node.h"
#include "models/catalog.h"
#include "sim/config/scenario.h"
#include "sim/run/scenario_runner.h"

namespace kvsim::cli {

namespace {

struct CheckArgs {
  std::string scenario;
  std::vector<std::string> sets;
};

void check(const CheckArgs& a) {
  const Scenario s =
      load_scenario_with_sets(ConfigNode::parse_file(a.scenario), a.sets, Catalog::builtin());
  prepare_scenario(s, RunOptions{});  // every error a run would find, without simulating
  const auto lints = lint_scenario(s);
  for (const auto& l : lints) fmt::print(stderr, "warning: {}\n", l);
  fmt::print("{}: ok (scenario '{}', model {}, gpu {}, {} warning{})\n", a.scenario, s.name,
             s.model.name, s.gpu.name, lints.size(), lints.size() == 1 ? "" : "s");
}

}  // namespace

void add_check_command(CLI::App& app) {
  auto a = std::make_shared<CheckArgs>();
  auto* cmd = app.add_subcommand("check", "validate a scenario file and print lints as warnings");
  cmd->add_option("scenario", a->scenario, "scenario YAML file")->required();
  cmd->add_option("--set", a->sets, "override a scenario key: path=value (repeatable)");
  cmd->callback([a] { check(*a); });
}

}  // namespace kvsim::cli
