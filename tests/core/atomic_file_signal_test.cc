// A stop signal that arrives while other threads create and remove AtomicFiles leaves no
// temporary: the handler (remove_open_temporaries, then _exit, as core/stop_signals.cc)
// runs on one thread while the others keep going. Before, a thread that had registered its
// temporary but not yet created it, or that opened a new one after the handler had looked at the
// table, left "<name>.tmp.<pid>" behind (`kvsim capacity -j 2` stopped by Ctrl-C, now and then).
// Here four threads churn through short files as fast as they can, so every SIGINT lands among
// opens; 40 children each get one.
#include <fmt/format.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/atomic_file.h"

namespace fs = std::filesystem;

namespace {

void stop_like_kvsim(int) {
  kvsim::remove_open_temporaries();
  ::_exit(130);
}

// The child: installs the handler, then `threads` threads each write and discard (every third
// one committed) files under dir/<thread>/ until the signal ends the process.
[[noreturn]] void churn_files(const fs::path& dir, int threads) {
  struct sigaction sa {};
  sa.sa_handler = stop_like_kvsim;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([dir, t] {
      for (unsigned n = 0;; ++n) {
        // fmt, not "f" + std::to_string(...): GCC 12 warns (-Wrestrict) on that, wrongly.
        kvsim::AtomicFile f(dir / std::to_string(t) / fmt::format("f{}.csv", n % 8));
        f.append("row\n");
        if (n % 3 == 0) f.commit();
      }
    });
  }
  for (auto& w : workers) w.join();
  ::_exit(0);
}

std::vector<std::string> temporaries_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) {
      out.push_back(e.path().string());
    }
  }
  return out;
}

}  // namespace

TEST_CASE("SIGINT among threads opening AtomicFiles leaves no temporary",
          "[core][atomic][signals]") {
  const fs::path root = fs::temp_directory_path() / ("kvsim-sigrace-" + std::to_string(::getpid()));
  fs::remove_all(root);
  int interrupted = 0;
  std::vector<std::string> left;
  for (int round = 0; round < 40; ++round) {
    const fs::path dir = root / std::to_string(round);
    fs::create_directories(dir);
    const pid_t child = ::fork();
    if (child == 0) churn_files(dir, 4);
    // Let the threads start (the first files appear), then a few ms more, varied per round.
    for (int wait = 0; wait < 50000 && !fs::exists(dir / "0"); ++wait) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500 * (round % 8)));
    ::kill(child, SIGINT);
    int status = 0;
    ::waitpid(child, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 130) ++interrupted;
    for (const std::string& t : temporaries_in(dir)) left.push_back(t);
  }
  CHECK(interrupted == 40);
  INFO("first temporary left: " << (left.empty() ? "" : left.front()));
  CHECK(left.empty());
  fs::remove_all(root);
}
