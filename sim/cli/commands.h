// One function per `kvsim` subcommand; each adds its subcommand, options and callback to the app.
// main.cc calls them all (explicit registration: nothing vanishes from a static library).
#pragma once

namespace CLI {
class App;
}

namespace kvsim::cli {

void add_kv_command(CLI::App& app);
void add_catalog_commands(CLI::App& app);  // `models` and `gpus`
void add_check_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_latency_command(CLI::App& app);       // `latency`
void add_plausibility_command(CLI::App& app);  // `plausibility`
void add_mem_command(CLI::App& app);           // `mem`

}  // namespace kvsim::cli
