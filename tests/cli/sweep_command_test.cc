#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/cli/run_cli.h"
#include "tests/test_skip.h"

namespace kvsim::test {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

const std::string kSweep = std::string(KVSIM_SOURCE_DIR) + "/scenarios/sweep-margin-blocksize.yaml";

TEST_CASE("kvsim sweep: --jobs 1 and --jobs 2 write identical summary.csv", "[cli][sweep]") {
  const std::string a = make_temp_dir("sweep-j1"), b = make_temp_dir("sweep-j2");
  const auto r1 = run_cli(fmt::format("sweep {} -o {} --jobs 1", kSweep, a));
  REQUIRE(r1.exit_code == 0);
  CHECK_THAT(r1.out, Contains("12 points, 12 run, 0 already complete"));
  CHECK(r1.err.empty());  // stderr is not a terminal here: no progress line
  const auto r2 = run_cli(fmt::format("sweep {} -o {} --jobs 2", kSweep, b));
  REQUIRE(r2.exit_code == 0);
  const std::string csv = read_text(a + "/summary.csv");
  CHECK(csv == read_text(b + "/summary.csv"));
  CHECK(csv.rfind("point,policies.1.guards.0.safety_margin_gb,engine.kv.block_size,policy,", 0) ==
        0);
  CHECK_THAT(csv, Contains("\n11,6,128,kv-guard,400,"));
  // sweep.json: the version, the hash of the scenario as given and the axes (grid keys: one each).
  const std::string index = read_text(a + "/sweep.json");
  CHECK_THAT(index, Contains("\"kvsim_version\": \"0."));
  CHECK_THAT(index, Contains("\"scenario_hash\": \""));
  CHECK_THAT(index, Contains("\"axes\": [\n    [\n      \"policies.1.guards.0.safety_margin_gb\"\n"
                             "    ],\n    [\n      \"engine.kv.block_size\"\n    ]\n  ]"));
  CHECK(index == read_text(b + "/sweep.json"));
  // Every point folder is an ordinary run folder.
  CHECK(fs::exists(a + "/points/00-safety_margin_gb=0_block_size=16/manifest.json"));
  CHECK(fs::exists(a + "/points/11-safety_margin_gb=6_block_size=128/requests.csv"));
}

TEST_CASE("kvsim sweep: --shard i/n and kvsim merge give the single-run summary.csv",
          "[cli][sweep]") {
  const std::string whole = make_temp_dir("sweep-whole"), shared = make_temp_dir("sweep-shared");
  const std::string set = "--set workload.trace.max_requests=100";
  REQUIRE(run_cli(fmt::format("sweep {} -o {} {}", kSweep, whole, set)).exit_code == 0);
  for (int i = 0; i < 3; ++i) {
    const auto r =
        run_cli(fmt::format("sweep {} -o {} {} --shard {}/3 --jobs 1", kSweep, shared, set, i));
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("(4 in shard"));
  }
  CHECK_FALSE(fs::exists(shared + "/summary.csv"));
  const auto m = run_cli(fmt::format("merge {}", shared));
  REQUIRE(m.exit_code == 0);
  CHECK(read_text(shared + "/summary.csv") == read_text(whole + "/summary.csv"));
  CHECK_THAT(read_text(whole + "/summary.csv"), Contains("\n0,0,16,no-guard,100,"));

  const auto bad = run_cli(fmt::format("sweep {} -o {} --shard 3/3", kSweep, make_temp_dir("x")));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("--shard '3/3'"));
  const auto missing = run_cli(fmt::format("merge {}", make_temp_dir("empty")));
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Contains("sweep.json"));
}

TEST_CASE("kvsim sweep: killed midway, re-run resumes to the same summary.csv", "[cli][sweep]") {
  const std::string ref = make_temp_dir("sweep-ref"), dir = make_temp_dir("sweep-killed");
  const std::string set = "--set workload.trace.max_requests=1500";
  REQUIRE(run_cli(fmt::format("sweep {} -o {} {} --jobs 1", kSweep, ref, set)).exit_code == 0);

  const std::string pid_file = dir + "/../" + fs::path(dir).filename().string() + ".pid";
  const std::string cmd =
      fmt::format("{} sweep {} -o {} {} --jobs 1 >/dev/null 2>&1 & echo $! > {}", KVSIM_BIN, kSweep,
                  dir, set, pid_file);
  REQUIRE(std::system(cmd.c_str()) == 0);
  pid_t pid = 0;
  for (int i = 0; i < 500 && pid == 0; ++i) {
    std::ifstream(pid_file) >> pid;
    if (pid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(pid > 0);
  const fs::path first =
      fs::path(dir) / "points" / "00-safety_margin_gb=0_block_size=16" / "manifest.json";
  for (int i = 0; i < 12000 && !fs::exists(first); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(fs::exists(first));
  ::kill(pid, SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // reaped by the shell's init
  const bool interrupted = !fs::exists(dir + "/summary.csv");
  INFO("the sweep finished before the kill; the resume is then trivial");
  CHECK(interrupted);

  const auto r = run_cli(fmt::format("sweep {} -o {} {} --jobs 2", kSweep, dir, set));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("already complete"));
  CHECK_THAT(r.out, Contains(fmt::format("12 points, ")));
  CHECK_FALSE(r.out.find(" 0 already complete") != std::string::npos);
  CHECK(read_text(dir + "/summary.csv") == read_text(ref + "/summary.csv"));
}

TEST_CASE("kvsim sweep: bad sweep keys are one-line errors", "[cli][sweep]") {
  const std::string dir = make_temp_dir("sweep-bad");
  {
    std::ofstream f(dir + "/s.yaml");
    f << "name: b\nmodel: llama-3-8b\ngpu: a100-sxm4-80gb\nworkload: {rate: 1, max_requests: 2}\n"
         "policies: [{name: p, guards: []}]\nsweep: {grid: {policies.3.name: [x]}}\n";
  }
  const auto r = run_cli(fmt::format("sweep {}/s.yaml -o {}/out", dir, dir));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("s.yaml:6:33") && Contains("index 3 past the end of a list of 1"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

}  // namespace
}  // namespace kvsim::test

namespace kvsim::test {
namespace {

// Leak checking is off for this one under the sanitizer build: OpenMPI's runtime-loaded modules
// keep allocations at exit that are not kvsim's.
TEST_CASE("kvsim sweep under mpirun -n 2: rank 0 writes the single-process summary.csv",
          "[cli][sweep][mpi]") {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    KVSIM_TEST_SKIP("mpi", "mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)");
  }
  if (run_cli("sweep --help").out.find("MPI") == std::string::npos) {
    KVSIM_TEST_SKIP("mpi",
                    "this kvsim was built without MPI (KVSIM_WITH_MPI off or MPI not found)");
  }
  const std::string single = make_temp_dir("sweep-single"), dir = make_temp_dir("sweep-mpi");
  const std::string set = "--set workload.trace.max_requests=100";
  REQUIRE(run_cli(fmt::format("sweep {} -o {} {}", kSweep, single, set)).exit_code == 0);
  const std::string log = dir + "/../" + fs::path(dir).filename().string() + ".log";
  const std::string cmd = fmt::format(
      "ASAN_OPTIONS=detect_leaks=0 timeout 240 mpirun --allow-run-as-root --oversubscribe -n 2 {} "
      "sweep {} -o {} {} >{} 2>&1",
      KVSIM_BIN, kSweep, dir, set, log);
  const int rc = std::system(cmd.c_str());
  INFO(read_text(log));
  REQUIRE(rc == 0);
  CHECK_THAT(read_text(log), Contains("12 points on 2 MPI ranks, rank 0 ran 6"));
  CHECK(read_text(dir + "/summary.csv") == read_text(single + "/summary.csv"));
}

}  // namespace
}  // namespace kvsim::test
