// AtomicFile removes what a killed writer of the same file left: "<name>.tmp.<pid>" of a pid that
// no longer runs (kill -9 skips every destructor; a sweep or timeline killed so left up to 186 MB
// that no resume removed). A running pid's temporary stays: another process may be writing it.
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/atomic_file.h"

namespace fs = std::filesystem;

namespace {

// A pid that has just ended (a child reaped): no process has it.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

}  // namespace

TEST_CASE("AtomicFile removes stale temporaries of its file, and only those", "[core][atomic]") {
  const fs::path dir = fs::temp_directory_path() / ("kvsim-stale-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const pid_t dead = dead_pid();
  const fs::path stale = dir / ("requests.csv.tmp." + std::to_string(dead));
  const fs::path live = dir / "requests.csv.tmp.1";                          // pid 1 always runs
  const fs::path other = dir / ("summary.csv.tmp." + std::to_string(dead));  // another file's
  const fs::path odd = dir / "requests.csv.tmp.notapid";
  for (const fs::path& p : {stale, live, other, odd}) std::ofstream(p) << "partial";
  {
    kvsim::AtomicFile f(dir / "requests.csv");
    f.append("id\n");
    f.commit();
  }
  CHECK(!fs::exists(stale));
  CHECK(fs::exists(live));
  CHECK(fs::exists(other));  // removed when summary.csv is written again
  CHECK(fs::exists(odd));
  kvsim::write_file_atomic(dir / "summary.csv", "x\n");
  CHECK(!fs::exists(other));
  fs::remove_all(dir);
}

// A result folder's stale temporaries of every file go at once: a run killed while writing a file
// the next run opens late (or never) leaves nothing behind once the next run starts.
TEST_CASE("remove_stale_temporaries_in removes every dead writer's temporary in the folder only",
          "[core][atomic]") {
  const fs::path dir = fs::temp_directory_path() / ("kvsim-stale-in-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "points");
  const std::string dead = std::to_string(dead_pid());
  const fs::path stale_a = dir / ("requests.csv.tmp." + dead);
  const fs::path stale_b = dir / ("timeseries.csv.tmp." + dead);
  const fs::path live = dir / "summary.csv.tmp.1";  // pid 1 always runs
  const fs::path below = dir / "points" / ("requests.csv.tmp." + dead);
  const fs::path odd = dir / "notes.tmp.x1";
  const fs::path bare = dir / (".tmp." + dead);  // no file name before the suffix
  for (const fs::path& p : {stale_a, stale_b, live, below, odd, bare}) {
    std::ofstream(p) << "partial";
  }
  kvsim::remove_stale_temporaries_in(dir);
  CHECK(!fs::exists(stale_a));
  CHECK(!fs::exists(stale_b));
  CHECK(fs::exists(live));
  CHECK(fs::exists(below));  // another folder: its own run removes it
  CHECK(fs::exists(odd));
  CHECK(fs::exists(bare));
  fs::remove_all(dir);
}
