// kvsim-validate's command line refuses what it cannot do in one line, "kvsim-validate: error:
// ...", exit 2, before anything is written: an -o path too long for the stop handler's table
// (core/atomic_file.h; kvsim refuses it the same way), a flag out of its range (CLI11 printed two
// lines without the prefix), and a scenario that only its set-up refuses (e2e named the copy it
// writes, OUT/scenario.yaml, instead of the user's file).
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

struct ValidateCliResult {
  int exit_code = -1;
  std::string err;
};

fs::path validate_scratch(const std::string& stem) {
  const fs::path d = fs::temp_directory_path() / (stem + "." + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// kvsim-validate ARGS (shell words), its exit code and stderr.
ValidateCliResult run_validate_cli(const std::string& args, const fs::path& scratch) {
  const fs::path err = scratch / "stderr.txt";
  const std::string cmd = std::string("'") + KVSIM_VALIDATE_BIN + "' " + args + " >/dev/null 2>'" +
                          err.string() + "' </dev/null";
  const int status = std::system(cmd.c_str());
  ValidateCliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err);
  std::stringstream s;
  s << in.rdbuf();
  r.err = s.str();
  fs::remove(err);
  return r;
}

size_t lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

}  // namespace

TEST_CASE("kvsim-validate refuses an -o path too long for the stop handler before writing",
          "[vllm_run][cli]") {
  const fs::path scratch = validate_scratch("kvsim-validate-cli");
  const fs::path d = validate_scratch("kvsim-validate-long-out");
  std::string deep = d.string();
  while (deep.size() < 1100) deep += "/" + std::string(100, 'a');
  const std::string bench = std::string(KVSIM_TEST_DATA) + "/vllm-runs";
  for (const std::string& args :
       {"profile --gpu a100-sxm4-80gb -o " + deep + "/p.yaml", "memprobe --backend cpu -o " + deep,
        "vllm-run " + bench + " --gpu a100-sxm4-80gb -o " + deep}) {
    INFO(args);
    const ValidateCliResult r = run_validate_cli(args, scratch);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, StartsWith("kvsim-validate: error: ") && Contains("path too long"));
    CHECK(lines(r.err) == 1);
    CHECK(fs::is_empty(d));
  }
  fs::remove_all(d);
  fs::remove_all(scratch);
}

TEST_CASE("kvsim-validate's command-line errors are one line with its prefix", "[vllm_run][cli]") {
  const fs::path scratch = validate_scratch("kvsim-validate-flags");
  const ValidateCliResult r = run_validate_cli(
      "import vidur " + scratch.string() + " -o " + scratch.string() + "/o --tp 0", scratch);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "kvsim-validate: error: --tp: Value 0 not in range 1 to 64\n");
  fs::remove_all(scratch);
}

// tests/data/bad/run/default-kv-no-room.yaml: llama-3-70b on an H200 with the default pool, which
// only the set-up refuses. e2e set it up only on its own copy, after the calibration, and named
// that copy; now it sets up the user's file first and writes nothing.
TEST_CASE("kvsim-validate e2e names the user's scenario for a set-up error", "[vllm_run][cli]") {
  const fs::path scratch = validate_scratch("kvsim-validate-e2e-setup");
  const std::string scenario = std::string(KVSIM_TEST_DATA) + "/bad/run/default-kv-no-room.yaml";
  const ValidateCliResult r = run_validate_cli(
      "e2e " + scenario + " --backend cpu --quiet -o " + (scratch / "out").string(), scratch);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("kvsim-validate: error: " + scenario + ":") &&
                        Contains("no room for the paged KV pool"));
  CHECK(lines(r.err) == 1);
  CHECK_FALSE(fs::exists(scratch / "out"));
  fs::remove_all(scratch);
}
