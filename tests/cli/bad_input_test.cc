// Bad input at the command line: every catalogued bad run scenario, every catalogued bad
// trace reached through a scenario, an unwritable output folder, runaway runs stopped by
// --max-events/--max-sim-time, overflowing KV arithmetic, and kill -9 in the middle of writing
// results. Each bad input must give exit code 2 and one line naming what is wrong.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "models/catalog.h"
#include "sim/config/scenario.h"
#include "tests/cli/run_cli.h"

using Catch::Matchers::Contains;
using kvsim::test::make_temp_dir;
using kvsim::test::read_text;
using kvsim::test::run_cli;
using kvsim::test::trim;
namespace fs = std::filesystem;

extern char** environ;

namespace {

std::vector<fs::path> files_with_extension(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ext) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The contract for bad input: exit code 2, one line on stderr, the expected text in it.
void check_clean_error(const kvsim::test::CliResult& r, const std::string& expected) {
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("kvsim: error: "));
  CHECK_THAT(r.err, Contains(expected));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("every bad run scenario gives its one-line error and exit code 2", "[cli][bad-input]") {
  const auto files = files_with_extension(fs::path(KVSIM_TEST_DATA) / "bad" / "run", ".yaml");
  REQUIRE(files.size() >= 9);
  for (const auto& f : files) {
    INFO("file " << f.filename());
    fs::path expected_file = f;
    expected_file.replace_extension(".expected");
    REQUIRE(fs::exists(expected_file));
    // From the file's folder, so a relative trace path resolves as it would for a user.
    check_clean_error(run_cli("run --no-output '" + f.string() + "'", f.parent_path().string()),
                      trim(read_text(expected_file.string())));
  }
}

TEST_CASE("every bad trace fails cleanly when a scenario replays it", "[cli][bad-input]") {
  const fs::path dir = fs::path(KVSIM_TEST_DATA) / "bad" / "traces";
  const std::string tmp = make_temp_dir("kvsim-bad-trace");
  int checked = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const fs::path trace = e.path();
    if (trace.extension() == ".expected" || trace.extension() == ".md") continue;
    INFO("trace " << trace.filename());
    fs::path expected_file = trace;
    expected_file += ".expected";
    REQUIRE(fs::exists(expected_file));
    const fs::path scenario = fs::path(tmp) / "scenario.yaml";
    write_text(scenario,
               "name: bad-trace\nmodel: seed-7b-mha\ngpu: a100-sxm4-80gb\n"
               "policies: [{name: none, guards: []}]\n"
               "workload:\n  trace: {path: '" +
                   trace.string() + "'}\n");
    check_clean_error(run_cli("run --no-output '" + scenario.string() + "'"),
                      trim(read_text(expected_file.string())));
    ++checked;
  }
  CHECK(checked >= 25);
  fs::remove_all(tmp);
}

TEST_CASE("an unwritable output folder is a clean error", "[cli][bad-input]") {
  // A folder below a regular file cannot be created, even by root.
  const std::string tmp = make_temp_dir("kvsim-unwritable");
  write_text(fs::path(tmp) / "plain-file", "not a folder\n");
  const std::string out = tmp + "/plain-file/results";
  auto r = run_cli("run -o '" + out + "' --set workload.duration_s=5");
  check_clean_error(r, out + ": cannot create output folder");
  CHECK_FALSE(fs::exists(out));
  fs::remove_all(tmp);
}

TEST_CASE("a runaway run is stopped by --max-events and --max-sim-time with a clear message",
          "[cli][bad-input]") {
  auto events = run_cli("run --no-output --max-events 1000");
  check_clean_error(events, "run stopped after --max-events (1000) events");
  CHECK_THAT(events.err, Contains("the scenario may be making no progress"));
  auto time = run_cli("run --no-output --max-sim-time 5");
  check_clean_error(time, "run stopped: simulated time passed --max-sim-time (5.000 s)");
}

namespace {

// Starts the kvsim binary with `args`, output discarded; returns its pid.
pid_t spawn_kvsim(const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {KVSIM_BIN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

}  // namespace

TEST_CASE("kill -9 during kvsim run leaves no half-written file under a final name",
          "[cli][crash-safety]") {
  // Seed A with short requests: ~0.6 MB of requests.csv, so writing the results takes a moment.
  // The reference is a complete run; runs are deterministic, so any file under a final name after
  // a kill must equal the reference's byte for byte.
  const std::string tmp = make_temp_dir("kvsim-kill9");
  const std::vector<std::string> common = {"--set", "workload.duration_s=60",
                                           "--set", "workload.prompt_tokens.value=256",
                                           "--set", "workload.output_tokens.value=16"};
  auto run_args = [&](const std::string& out) {
    std::vector<std::string> args = {
        "run", std::string(KVSIM_SOURCE_DIR) + "/scenarios/seed-a-guard.yaml", "-o", out};
    args.insert(args.end(), common.begin(), common.end());
    return args;
  };
  auto run_to_end = [&](const std::string& out) {
    const pid_t pid = spawn_kvsim(run_args(out));
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
  };
  const std::string ref = tmp + "/ref";
  REQUIRE(run_to_end(ref));

  // Kill the moment the folder appears, then the moment each result file is renamed into place
  // (the writer is then already busy with the next one).
  const std::vector<std::string> kill_when = {"", "requests.csv", "timeseries.csv", "summary.csv",
                                              "summary.json"};
  int partial_states = 0;  // kills that left some but not all files in place
  for (size_t attempt = 0; attempt < kill_when.size(); ++attempt) {
    INFO("kill when '" << kill_when[attempt] << "' appears");
    const std::string out = tmp + "/killed-" + std::to_string(attempt);
    const fs::path trigger = fs::path(out) / kill_when[attempt];
    const pid_t pid = spawn_kvsim(run_args(out));
    REQUIRE(pid > 0);
    int status = 0;
    bool exited = false;
    while (!fs::exists(trigger)) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (!exited) {
      ::kill(pid, SIGKILL);
      REQUIRE(waitpid(pid, &status, 0) == pid);
    }
    int finals = 0;
    for (const auto& e : fs::directory_iterator(out)) {
      const std::string name = e.path().filename().string();
      if (name.find(".tmp.") != std::string::npos) continue;  // a temporary: allowed to be partial
      INFO("file " << name);
      REQUIRE(fs::exists(fs::path(ref) / name));
      CHECK(read_text(e.path().string()) == read_text(ref + "/" + name));
      ++finals;
    }
    if (finals > 0 && !fs::exists(fs::path(out) / "manifest.json")) ++partial_states;
    // A re-run into the same folder completes and replaces everything with complete files.
    REQUIRE(run_to_end(out));
    for (const char* f :
         {"manifest.json", "summary.json", "summary.csv", "requests.csv", "timeseries.csv"}) {
      CHECK(read_text(out + "/" + f) == read_text(ref + "/" + f));
    }
  }
  // Where each kill lands depends on timing, so this is reported, not asserted.
  WARN("kill -9 attempts that left a partial result folder: " << partial_states << " of "
                                                              << kill_when.size());
  fs::remove_all(tmp);
}

TEST_CASE("the kv_guard shape lint does not overflow on absurd guard figures", "[cli][bounds]") {
  // Regression: the lint multiplied the guard's raw int64 figures, which wrapped (undefined
  // behaviour) and printed a negative factor.
  const std::string tmp = make_temp_dir("kvsim-lint-overflow");
  const fs::path f = fs::path(tmp) / "s.yaml";
  write_text(f,
             "name: s\nmodel: seed-7b-mha\ngpu: a100-sxm4-80gb\npolicies:\n"
             "  - {name: k, guards: [{type: kv_guard, num_layers: 4000000000000,\n"
             "     num_heads: 4000000000000, head_dim: 4000000000000}]}\n");
  // The lint itself, on the loaded scenario (before the guard's own bounds are applied):
  // (4e12)^3 / (32 x 32 x 128) = 4.8828125e32, positive (the wrapped product gave a negative).
  std::string lints;
  for (const auto& l :
       kvsim::lint_scenario(kvsim::load_scenario_file(f, kvsim::Catalog::builtin()))) {
    lints += l + "\n";
  }
  CHECK_THAT(lints, Contains("its estimate is off by 4882812500000000"));
  CHECK_THAT(lints, !Contains("off by -"));
  // `kvsim check` sets the guard up as a run would, and its bounds refuse the figures cleanly.
  auto r = run_cli("check '" + f.string() + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Contains("s.yaml:5:53: policies[0].guards[0].num_layers: expected an integer >= 1"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  fs::remove_all(tmp);
}

TEST_CASE("a huge model just inside the KV bound runs and billion-token requests are too long",
          "[cli][bounds]") {
  // 1000 layers x 4096 KV heads x head dim 4096 in FP32: 134,217,728,000 KV bytes per token.
  // max_position 7,450,580 needs 9.99999998e17 bytes, just under the 1e18 load-time bound
  // (kMaxSequenceKvBytes); one more token is over it (tests/data/bad/scenario/kv-overflow-model).
  // Every 2e9-token request must be turned away as too long, with no overflow on the way (a
  // max_position of 1e9 used to reach a signed overflow in the paged store's OOM report).
  const std::string tmp = make_temp_dir("kvsim-huge-model");
  const fs::path f = fs::path(tmp) / "s.yaml";
  const std::string model =
      "model: {name: giant, layers: 1000, heads: 4096, kv_heads: 4096, head_dim: 4096,\n"
      "        hidden: 1048576, ffn: 4194304, vocab: 16777216, weights_gb: 1, kv_dtype: fp32,\n"
      "        max_position: ";
  const std::string rest =
      "}\ngpu: {name: g, memory_gb: 100000, hbm_gb_per_s: 2000, fp16_tflops: 312}\n"
      "policies: [{name: none, guards: []}, {name: reserve, guards: [{type: reserve}]}]\n"
      // Past max_position and chunked (a 7.45M-token unchunked batch would leave no room for
      // the pool's activation profile): the requests reach the KV store, which refuses them.
      // A pool of 10 blocks given by count: a pool sized by gpu_memory_utilization could not
      // hold one 2e9-token request, and vLLM's start-up check would refuse the engine.
      "engine: {kv: {type: paged, num_blocks: 10}, chunked_prefill: true, max_model_len: "
      "2000000000,\n"
      "         allow_long_max_model_len: true}\n"
      "workload:\n"
      "  clients: {type: closed_loop, count: 2}\n"
      "  prompt_tokens: 1000000000\n"
      "  output_tokens: 1000000000\n"
      "  max_requests: 4\n";
  write_text(f, "name: huge\n" + model + "7450580" + rest);
  auto r = run_cli("run -o '" + tmp + "/out' '" + f.string() + "'");
  REQUIRE(r.exit_code == 0);
  CHECK(r.err == "");
  CHECK_THAT(read_text(tmp + "/out/summary.json"), Contains("\"rejected_too_long\": 4"));
  write_text(f, "name: huge\n" + model + "7450581" + rest);
  check_clean_error(run_cli("check '" + f.string() + "'"),
                    "needs more than 1e18 bytes of KV; lower max_position or the model's size");
  fs::remove_all(tmp);
}

TEST_CASE("kvsim check and kvsim run report an engine or policy error with the same line",
          "[cli][bad-input]") {
  // Errors inside the scenario's `engine:` / `engine.kv:` and inside a
  // policy's `engine:` override name the line and column written (the merge used to lose them:
  // 1:1, or no position at all), and a second policy with a name already used is refused.
  const fs::path dir = fs::path(KVSIM_TEST_DATA) / "bad" / "run";
  for (const char* name :
       {"engine-scalar", "engine-kv-unknown-key", "policy-engine-scalar",
        "policy-engine-kv-unknown-key", "policy-engine-unknown-key", "duplicate-policy-name"}) {
    INFO("file " << name);
    const fs::path f = dir / (std::string(name) + ".yaml");
    const std::string expected =
        trim(read_text((dir / (std::string(name) + ".expected")).string()));
    const auto check = run_cli("check '" + f.string() + "'", dir.string());
    const auto run = run_cli("run --no-output '" + f.string() + "'", dir.string());
    check_clean_error(check, expected);
    check_clean_error(run, expected);
    CHECK(check.err == run.err);
    CHECK_THAT(expected, !Contains(":1:1:"));
  }
}
