// Parse loop: the fuzz_scenario target's work (tests/fuzz/fuzz_scenario.cc: parse a scenario,
// load it, lint it, draw a few requests from its workload) repeated over the project's own
// scenario files in a plain build, printing the resident set as it goes. A fuzzing run saw RSS grow
// by about 1 KB per parse under libFuzzer + ASan; a flat line here shows that growth is the tools'
// bookkeeping (libFuzzer's corpus and coverage tables, ASan's quarantine of freed memory and its
// allocation stacks), not memory kvsim keeps.
//
//   kvsim_bench_parse [--parses N] [--every K] [FILE...]
//     default files: scenarios/*.yaml, tests/data/scenarios/*.yaml and
//     tests/data/bad/scenario/*.yaml (the bad ones take the error path). One JSON line every K
//     parses and one at the end.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "core/config_node.h"
#include "core/data_path.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "sim/config/scenario.h"
#include "workloads/workload.h"

namespace {

namespace fs = std::filesystem;

long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  const std::string prefix = std::string(field) + ":";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return std::stol(line.substr(prefix.size()));
  }
  return 0;
}

std::vector<fs::path> default_files() {
  std::vector<fs::path> files;
  const fs::path root = KVSIM_SOURCE_DIR;
  for (const char* dir : {"scenarios", "tests/data/scenarios", "tests/data/bad/scenario"}) {
    if (!fs::is_directory(root / dir)) continue;
    for (const auto& e : fs::directory_iterator(root / dir)) {
      if (e.path().extension() == ".yaml") files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kvsim;
  long parses = 200'000, every = 20'000;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const bool known = bench::read_flag(argc, argv, i, "--parses", parses) ||
                       bench::read_flag(argc, argv, i, "--every", every);
    if (!known) files.emplace_back(argv[i]);  // a scenario file
  }
  if (files.empty()) files = default_files();
  std::vector<std::pair<std::string, std::string>> texts;  // (name, content)
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    texts.emplace_back(f.filename().string(), ss.str());
  }
  if (texts.empty()) {
    fmt::print(stderr, "no scenario files\n");
    return 2;
  }
  const Catalog& catalog = Catalog::builtin();
  long rejected = 0;
  const auto start = std::chrono::steady_clock::now();
  for (long i = 1; i <= parses; ++i) {
    const auto& [name, text] = texts[static_cast<size_t>(i) % texts.size()];
    try {
      const ConfigNode root = ConfigNode::parse_string(text, name);
      const Scenario s = load_scenario(root, catalog);
      (void)lint_scenario(s);
      if (auto w = s.root.optional_child("workload")) {
        Workload wl = make_workload(*w, s.seed);
        for (int k = 0; k < 16 && wl.source && wl.source->next(); ++k) {
        }
      }
    } catch (const InputError&) {
      ++rejected;
    }
    if (i % every == 0 || i == parses) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      fmt::print(
          "{{\"parses\":{},\"files\":{},\"rejected\":{},\"wall_s\":{:.2f},\"vm_rss_kib\":{},"
          "\"vm_hwm_kib\":{}}}\n",
          i, texts.size(), rejected, s, status_kib("VmRSS"), status_kib("VmHWM"));
      std::fflush(stdout);
    }
  }
  return 0;
}
