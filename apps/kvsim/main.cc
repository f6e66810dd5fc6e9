// kvsim's entry point: the subcommands, logging, and the one place that catches every error,
// prints it as one line and picks the exit code (2 bad input, 3 internal invariant, 4 other).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "apps/cli_main.h"
#include "apps/kvsim/commands.h"
#include "core/data_path.h"
#include "core/errors.h"
#include "core/stop_signals.h"

namespace {

void setup_logging(const std::string& level) {
  // One named logger per area; all write to stderr so results on stdout stay machine-readable.
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  for (const char* name : {"kvsim", "engine", "mem", "guard", "workload", "latency"}) {
    auto logger = std::make_shared<spdlog::logger>(name, sink);
    logger->set_pattern("[%l] %n: %v");
    spdlog::register_logger(logger);
  }
  spdlog::set_default_logger(spdlog::get("kvsim"));
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace

int main(int argc, char** argv) {
  kvsim::install_stop_signals("kvsim");  // SIGINT, SIGTERM, SIGXFSZ: no temporary left behind
  CLI::App app{"kvsim: a discrete-event simulator of LLM inference serving memory"};
  app.set_version_flag("--version", std::string("kvsim ") + kvsim::kvsim_version());
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  app.parse_complete_callback([&] { setup_logging(log_level); });

  kvsim::cli::add_kv_command(app);
  kvsim::cli::add_catalog_commands(app);
  kvsim::cli::add_check_command(app);
  kvsim::cli::add_run_command(app);
  kvsim::cli::add_latency_command(app);
  kvsim::cli::add_plausibility_command(app);
  kvsim::cli::add_mem_command(app);
  kvsim::cli::add_plot_command(app);
  kvsim::cli::add_report_command(app);
  kvsim::cli::add_sweep_command(app);
  kvsim::cli::add_capacity_command(app);
  kvsim::cli::add_merge_command(app);
  kvsim::cli::add_list_command(app);

  return kvsim::parse_and_report(app, argc, argv, "kvsim");
}
