#include "tests/cli/run_cli.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvsim::test {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string make_temp_dir(const std::string& stem) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string();
  char* made = ::mkdtemp(tmpl.data());
  return made ? std::string(made) : std::string();
}

CliResult run_cli(const std::string& args, const std::string& cwd) {
  const std::string dir = make_temp_dir("kvsim-cli");
  const std::string out = dir + "/out", err = dir + "/err";
  std::string cmd;
  if (!cwd.empty()) cmd += "cd '" + cwd + "' && ";
  cmd += std::string("'") + KVSIM_BIN + "' " + args + " >'" + out + "' 2>'" + err + "' </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  std::filesystem::remove_all(dir);
  return r;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace kvsim::test
