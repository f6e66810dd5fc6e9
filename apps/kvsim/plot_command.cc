// `kvsim plot DIR [-o PLOTDIR] [--format png|svg|pdf]`: renders the figures of a run, sweep or
// kvsim-validate folder by running scripts/kvsim_plot/ (a Python package, matplotlib) from kvsim's
// data folder, so the figures can be restyled by editing Python files, with no rebuild.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/kvsim/commands.h"
#include "core/data_path.h"
#include "core/errors.h"

namespace kvsim::cli {

namespace {

// Debian's matplotlib lives with /usr/bin/python3; a python3 earlier on PATH may lack it.
std::string python_interpreter() {
  if (const char* env = std::getenv("KVSIM_PYTHON"); env && *env) return env;
  std::error_code ec;
  if (std::filesystem::exists("/usr/bin/python3", ec)) return "/usr/bin/python3";
  return "python3";
}

}  // namespace

void run_data_script(const std::string& script, const std::vector<std::string>& args) {
  const std::string path = data_file("scripts/" + script).string();
  const std::string python = python_interpreter();
  std::vector<std::string> argv_s = {python, path};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);  // the child shares stdout; keep output in order
  const pid_t pid = ::fork();
  if (pid < 0) throw InputError(fmt::format("cannot start {}: {}", python, std::strerror(errno)));
  if (pid == 0) {
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "kvsim: error: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw InputError(fmt::format("waiting for {}: {}", path, std::strerror(errno)));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  // The script has already printed its one-line reason; this line says which step failed.
  throw InputError(fmt::format("{} {} failed ({})", python, path,
                               WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status))
                                                 : fmt::format("signal {}", WTERMSIG(status))));
}

void add_plot_command(CLI::App& app) {
  struct Options {
    std::string dir, out, format = "png";
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "plot", "render the figures of a run, sweep or kvsim-validate folder (needs matplotlib)");
  cmd->add_option("dir", o->dir, "result folder")->required();
  cmd->add_option("-o,--out", o->out, "where the figures go (default DIR/plots)");
  cmd->add_option("--format", o->format, "image format")
      ->check(CLI::IsMember({"png", "svg", "pdf"}))
      ->capture_default_str();
  cmd->callback([o] {
    std::vector<std::string> args = {o->dir, "--format", o->format};
    if (!o->out.empty()) args.insert(args.end(), {"-o", o->out});
    run_data_script(kPlotScript, args);
  });
}

}  // namespace kvsim::cli
