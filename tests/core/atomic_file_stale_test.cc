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
