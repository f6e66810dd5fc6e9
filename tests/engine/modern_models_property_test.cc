// The property suites' checks over the 2026 models (random_modern_scenario): hybrid
// local/global attention, MoE and speculative decoding run in checking mode (pool, group and
// bookkeeping invariants after every iteration), account for every request, and write the same
// bytes with the fast-forward on and off (it runs only where its closed forms hold; elsewhere the
// engine steps, and the identity must hold all the same).
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>

#include <unistd.h>

#include <fmt/format.h>

#include "tests/engine/engine_test_util.h"
#include "tests/engine/random_scenario.h"

using namespace kvsim;

TEST_CASE("random hybrid, MoE and speculative scenarios keep every invariant",
          "[property][engine][hybrid][moe][speculative]") {
  const uint64_t seed = GENERATE(range(0, 30));
  const std::string yaml = test::random_modern_scenario(5000 + seed);
  INFO("seed " << 5000 + seed << "\n" << yaml);
  const RunResult r = test::run_yaml(yaml, /*check=*/true);
  const PolicySummary& p = r.policies.at(0);
  int64_t total = 0;
  for (int64_t n : p.outcomes) total += n;
  CHECK(total == p.requests_total);
  CHECK(p.requests_total == 40);
  std::filesystem::remove(test::random_trace_path(5000 + seed));
}

TEST_CASE("random hybrid, MoE and speculative scenarios write identical files either mode",
          "[property][engine][fast_forward][hybrid][moe][speculative]") {
  namespace fs = std::filesystem;
  const uint64_t seed = GENERATE(range(0, 30));
  const std::string yaml = test::random_modern_scenario(7000 + seed);
  INFO("seed " << 7000 + seed << "\n" << yaml);
  const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
  const fs::path base =
      fs::temp_directory_path() / fmt::format("kvsim-modern-ff-{}-{}", ::getpid(), seed);
  test::check_modes_write_identical_files(s, base);
  fs::remove(test::random_trace_path(7000 + seed));
}

// The two tests above mean something only if their scenarios reach the hard cases: over the
// invariant test's seeds, every model kind runs, pools preempt, prefix caches hit and drafts are
// accepted. Bounds are well below what the sample gives, so that a scheduling change which moves
// a few does not fail it, while a generator that never reaches a case does.
TEST_CASE("the random hybrid, MoE and speculative scenarios reach preemption, hits and drafts",
          "[property][engine][hybrid][moe][speculative]") {
  std::map<std::string, int> runs_by_model;
  int64_t preemptions = 0, hit_blocks = 0, accepted = 0, fast_forwarded = 0;
  for (uint64_t seed = 5000; seed < 5030; ++seed) {
    const std::string yaml = test::random_modern_scenario(seed);
    const Scenario s =
        load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
    RunOptions o;
    o.sample_interval_s = 0.5;
    const PolicySummary p = run_scenario(s, o).policies.at(0);
    ++runs_by_model[s.model.name];
    preemptions += p.preemptions;
    hit_blocks += p.prefix_hit_blocks;
    if (p.speculative) accepted += p.speculative->accepted_tokens;
    fast_forwarded += p.fast_forward_iterations;
    std::filesystem::remove(test::random_trace_path(seed));
  }
  INFO("preemptions " << preemptions << ", hit blocks " << hit_blocks << ", accepted drafts "
                      << accepted << ", closed-form iterations " << fast_forwarded);
  CHECK(runs_by_model.size() == 4);  // gemma-3-27b, gpt-oss-20b, qwen3-30b-a3b, llama-3-8b
  CHECK(preemptions > 20);
  CHECK(hit_blocks > 100);
  CHECK(accepted > 1000);
  CHECK(fast_forwarded > 100);  // the MoE model's decode stretches
}
