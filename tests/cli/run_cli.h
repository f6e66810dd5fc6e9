// Runs the built kvsim binary with arguments and captures exit code, stdout and stderr.
#pragma once

#include <string>

namespace kvsim::test {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `args` is appended to the binary's path and run through /bin/sh from `cwd` (default: the
// current folder).
CliResult run_cli(const std::string& args, const std::string& cwd = "");

// A fresh empty folder under the system temp dir, unique per call.
std::string make_temp_dir(const std::string& stem);

std::string read_text(const std::string& path);

// `s` without its trailing newlines and spaces (an expected-message file's last line).
std::string trim(std::string s);

}  // namespace kvsim::test
