// `kvsim-validate vllm-run --fit-step-overhead` stopped by SIGINT or SIGTERM exits 130 or 143
// and leaves neither "<name>.tmp.<pid>" files nor a partial step-overhead-fit/ folder (the
// bisection's runs) behind. Before, no handler ran: the signal's default action left both.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

// A bench serve result of 20,000 requests at 10 a second: each of the fit's kvsim runs takes
// a noticeable time, so the signal finds the bisection running.
fs::path write_long_bench(const fs::path& dir) {
  const int n = 20000;
  nlohmann::json j = {{"model_id", "meta-llama/Llama-3.1-8B"}};
  for (int i = 0; i < n; ++i) {
    j["input_lens"].push_back(200);
    j["output_lens"].push_back(50);
    j["ttfts"].push_back(0.05);
    j["itls"].push_back(std::vector<double>(49, 0.03));
    j["start_times"].push_back(0.1 * i);
  }
  std::ofstream(dir / "bench.json") << j.dump();
  return dir / "bench.json";
}

pid_t spawn_validate(const std::vector<std::string>& args) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    std::vector<char*> argv{const_cast<char*>(KVSIM_VALIDATE_BIN)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(KVSIM_VALIDATE_BIN, argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits (at most two minutes) until `p` has a file in it.
bool wait_for_files_in(const fs::path& p) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (std::chrono::steady_clock::now() < until) {
    std::error_code ec;
    if (fs::is_directory(p, ec) && fs::directory_iterator(p, ec) != fs::directory_iterator()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

int wait_exit(pid_t pid) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(1);
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

std::vector<std::string> temporaries_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().find(".tmp.") != std::string::npos) {
      out.push_back(it->path().string());
    }
  }
  return out;
}

}  // namespace

TEST_CASE("vllm-run --fit-step-overhead stopped by a signal leaves no partial fit folder",
          "[vllm_run][signals]") {
  const fs::path d = fs::temp_directory_path() / ("kvsim-vllm-stop-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  const fs::path bench = write_long_bench(d);
  for (const int sig : {SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    const fs::path out = d / ("out-" + std::to_string(sig));
    const pid_t pid = spawn_validate({"vllm-run", bench.string(), "--gpu", "rtx-pro-6000", "-o",
                                      out.string(), "--fit-step-overhead", "--quiet", "--no-plot"});
    REQUIRE(wait_for_files_in(out / "step-overhead-fit"));
    ::kill(pid, sig);
    CHECK(wait_exit(pid) == 128 + sig);
    CHECK_FALSE(fs::exists(out / "step-overhead-fit"));
    CHECK(temporaries_in(out).empty());
    CHECK_FALSE(
        fs::exists(fs::temp_directory_path() / ("kvsim-vllm-run-check." + std::to_string(pid))));
  }
  fs::remove_all(d);
}
