// One function per `kvsim` subcommand; each adds its subcommand, options and callback to the app.
// main.cc calls them all (explicit registration: nothing vanishes from a static library).
#pragma once

#include <string>
#include <vector>

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
void add_plot_command(CLI::App& app);          // `plot`
void add_report_command(CLI::App& app);        // `report`
void add_sweep_command(CLI::App& app);         // `sweep`
void add_merge_command(CLI::App& app);         // `merge`
void add_capacity_command(CLI::App& app);      // `capacity`
void add_list_command(CLI::App& app);          // `list`: every registry's names, descriptions, keys

// The figures' renderer: scripts/kvsim_plot/, a Python package that runs as a folder (its
// __main__.py), so run_data_script(kPlotScript, ...) calls it like a one-file script.
inline constexpr const char* kPlotScript = "kvsim_plot";

// Runs scripts/<script> from data_dir() with Python ($KVSIM_PYTHON, else /usr/bin/python3, else
// python3 on PATH) and `args`; throws InputError when it exits nonzero (it prints why).
void run_data_script(const std::string& script, const std::vector<std::string>& args);

}  // namespace kvsim::cli
