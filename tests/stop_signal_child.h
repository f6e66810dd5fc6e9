// For the tests that stop a kvsim program with a signal (tests/cli/stop_signals_test.cc,
// tests/vllm_run/vllm_run_signals_test.cc): start it as a terminal would (stop signals at their
// defaults, unblocked), wait until its handler is installed, find the temporaries it left, and
// wait for its exit. Both programs share one handler (core/stop_signals.h), so one scaffold.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace kvsim::test {

// Starts `bin` with `args`. A child of a background job inherits SIGINT ignored, and the programs
// keep an ignored signal ignored: the child resets the three stop signals. Its stdout goes
// nowhere, its stderr to `err_file` ("": nowhere); `file_limit` is its `ulimit -f` in bytes.
inline pid_t spawn_for_signal(const char* bin, const std::vector<std::string>& args,
                              const std::string& err_file = "", rlim_t file_limit = RLIM_INFINITY) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (int sig : {SIGINT, SIGTERM, SIGXFSZ}) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    std::freopen("/dev/null", "w", stdout);
    std::freopen(err_file.empty() ? "/dev/null" : err_file.c_str(), "w", stderr);
    const rlimit limit{file_limit, file_limit};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    std::vector<char*> argv{const_cast<char*>(bin)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(bin, argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits (at most a minute) until `pid`, running `bin`, catches `sig` (SigCgt in
// /proc/PID/status): a signal sent before main() installs the handler gets the default action,
// which a loaded machine's slow start made a flaky exit by signal instead of 128 + signal. Until
// the exec the child still holds the test binary's handlers (Catch2 catches SIGINT), so its
// executable must be `bin` first. False if it never is (or it exited first).
inline bool wait_for_handler(pid_t pid, const char* bin, int sig) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const std::string proc = "/proc/" + std::to_string(pid);
  std::error_code ec;
  const std::filesystem::path program = std::filesystem::canonical(bin, ec);
  while (std::chrono::steady_clock::now() < until) {
    std::error_code exe_ec;
    const bool exec_done = std::filesystem::read_symlink(proc + "/exe", exe_ec) == program;
    std::ifstream in(proc + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("State:", 0) == 0 && line.find('Z') != std::string::npos) return false;
      if (!exec_done || line.rfind("SigCgt:", 0) != 0) continue;
      const unsigned long long caught = std::stoull(line.substr(7), nullptr, 16);
      if ((caught >> (sig - 1)) & 1) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// The temporaries under `dir` ("<name>.tmp.<pid>"), of `pid` only when it is not 0.
inline std::vector<std::string> temporaries_under(const std::filesystem::path& dir, pid_t pid = 0) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t at = name.find(".tmp.");
    if (at == std::string::npos) continue;
    if (pid == 0 || name.substr(at + 5) == std::to_string(pid)) out.push_back(it->path().string());
  }
  return out;
}

// The exit code of `pid` (-signal if a signal ended it), waiting at most a minute (then -1000,
// the child killed).
inline int wait_exit(pid_t pid) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1000;
}

}  // namespace kvsim::test
