// Runs a shell command for the validate tests and captures its exit code and output.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kvsim::test {

struct Shell {
  int exit_code = -1;
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::filesystem::path fresh_dir(const std::string& stem) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string();
  char* made = ::mkdtemp(tmpl.data());
  return made ? std::filesystem::path(made) : std::filesystem::path();
}

inline Shell shell(const std::string& cmd) {
  const auto dir = fresh_dir("kvsim-validate-sh");
  const std::string full =
      cmd + " >'" + (dir / "out").string() + "' 2>'" + (dir / "err").string() + "' </dev/null";
  const int status = std::system(full.c_str());
  Shell r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  std::filesystem::remove_all(dir);
  return r;
}

inline std::string validate_bin() { return std::string("'") + KVSIM_VALIDATE_BIN + "' "; }
inline std::string kvsim_bin() { return std::string("'") + KVSIM_BIN + "' "; }

}  // namespace kvsim::test
