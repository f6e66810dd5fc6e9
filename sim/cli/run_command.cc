// `kvsim run [SCENARIO.yaml]`: the main job. Until the serving engine lands (issue 5) it prints
// the KV calculator's seed table for the default scenario's model and GPU.
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include "models/catalog.h"
#include "models/kv_calculator.h"
#include "sim/cli/commands.h"
#include "sim/cli/text_table.h"
#include "sim/config/scenario.h"
#include "sim/core/data_path.h"
#include "sim/core/units.h"

namespace kvsim::cli {

namespace {

void print_seed_table() {
  // Seed A's table: seed-7b-mha, 4 concurrent requests, 80 GB (decimal), 16 GB of weights.
  KvQuery q;
  q.model = Catalog::builtin().model("seed-7b-mha");
  q.seq_lens = {4096, 8192, 16384, 32768};
  q.batch = 4;
  q.capacity_bytes = 80 * kGB;
  q.weights_bytes = 16 * kGB;
  fmt::print("Seed A's KV table, exact (seed-7b-mha, batch 4, 80 GB capacity, 16 GB weights):\n\n");
  TextTable t({"seq_len", "KV per request (GB)", "KV for 4 (GB)", "left (GB)", "left (bytes)", "risk"});
  for (const KvRow& r : kv_table(q)) {
    t.add_row({with_commas(r.seq_len), fmt::format("{:.2f}", to_gb(r.kv_bytes_per_request)),
               fmt::format("{:.2f}", to_gb(r.kv_bytes_total)),
               fmt::format("{:.2f}", to_gb(*r.remaining_bytes)), with_commas(*r.remaining_bytes),
               std::string(risk_name(r.risk))});
  }
  fmt::print("{}", t.render());
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("run", "run a scenario (default: the embedded seed-a-guard scenario)");
  cmd->add_option("scenario", *path, "scenario YAML file");
  cmd->callback([path] {
    const std::string file =
        path->empty() ? data_file("scenarios/seed-a-guard.yaml").string() : *path;
    const Scenario s = load_scenario_file(file, Catalog::builtin());
    fmt::print("scenario '{}' (model {}, gpu {}) loaded from {}\n", s.name, s.model.name,
               s.gpu.name, file);
    fmt::print("The serving engine is not built yet; showing the KV calculator instead.\n\n");
    print_seed_table();
  });
}

}  // namespace kvsim::cli
