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

#include "tests/stop_signal_child.h"

namespace {

namespace fs = std::filesystem;
using kvsim::test::spawn_for_signal;
using kvsim::test::temporaries_under;
using kvsim::test::wait_exit;

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
    const pid_t pid = spawn_for_signal(
        KVSIM_VALIDATE_BIN, {"vllm-run", bench.string(), "--gpu", "rtx-pro-6000", "-o",
                             out.string(), "--fit-step-overhead", "--quiet", "--no-plot"});
    REQUIRE(wait_for_files_in(out / "step-overhead-fit"));
    ::kill(pid, sig);
    CHECK(wait_exit(pid) == 128 + sig);
    CHECK_FALSE(fs::exists(out / "step-overhead-fit"));
    CHECK(temporaries_under(out).empty());
    CHECK_FALSE(
        fs::exists(fs::temp_directory_path() / ("kvsim-vllm-run-check." + std::to_string(pid))));
  }
  fs::remove_all(d);
}

// kvsim-validate shares kvsim's handler (core/stop_signals.h): a write past `ulimit -f` removes
// the temporary and exits 128 + SIGXFSZ (153) with its one line, where SIGXFSZ's default action
// ended it with a core dump and the temporary left. The profile YAML of a catalog GPU is well
// over the 1 KiB limit (about 2.2 KB) and written in one piece at commit; the one-line message
// (80 bytes) is under it, since the limit holds for stderr's file too.
TEST_CASE("kvsim-validate past the file size limit removes its temporary and exits 153",
          "[vllm_run][signals]") {
  const fs::path d =
      fs::temp_directory_path() / ("kvsim-validate-xfsz-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  const pid_t pid = spawn_for_signal(
      KVSIM_VALIDATE_BIN, {"profile", "--gpu", "a100-sxm4-80gb", "-o", (d / "p.yaml").string()},
      (d / "err.txt").string(), 1024);
  CHECK(wait_exit(pid) == 128 + SIGXFSZ);
  CHECK(temporaries_under(d).empty());
  CHECK_FALSE(fs::exists(d / "p.yaml"));
  std::ifstream err(d / "err.txt");
  std::string line;
  std::getline(err, line);
  CHECK(line == "kvsim-validate: file size limit exceeded (SIGXFSZ); unfinished files removed");
  fs::remove_all(d);
}
