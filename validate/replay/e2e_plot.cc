#include "validate/replay/e2e_plot.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/data_path.h"
#include "core/errors.h"

namespace kvsim::validate {

void render_e2e_figure(const std::filesystem::path& dir) {
  // The interpreter `kvsim plot` uses: $KVSIM_PYTHON, else the system python3 (matplotlib).
  std::string python = "python3";
  if (const char* env = std::getenv("KVSIM_PYTHON"); env && *env) {
    python = env;
  } else if (std::error_code ec; std::filesystem::exists("/usr/bin/python3", ec)) {
    python = "/usr/bin/python3";
  }
  std::vector<std::string> args = {python, data_file("scripts/kvsim_plot").string(), dir.string(),
                                   "-o", dir.string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) throw InputError(fmt::format("cannot start {}: {}", python, std::strerror(errno)));
  if (pid == 0) {
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "kvsim-validate: error: cannot run %s: %s\n", argv[0],
                 std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw InputError(fmt::format("waiting for {}: {}", python, std::strerror(errno)));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  throw InputError(fmt::format("{} scripts/kvsim_plot {} failed ({})", python, dir.string(),
                               WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status))
                                                 : fmt::format("signal {}", WTERMSIG(status))));
}

}  // namespace kvsim::validate
