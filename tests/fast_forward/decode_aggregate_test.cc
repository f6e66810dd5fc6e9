// The decode aggregate (sim/serving/fast_forward/lazy_decodes.h) and the fast-forward around it, on
// a case worked out by hand: two decoding requests and a long prompt that waits for its whole
// sequence to fit (vLLM V1's full-sequence admission), in a pool of seven 16-token blocks. The
// stretch runs while the long prompt waits, counts a block crossing in aggregate, stops before the
// crossing that runs short (a preemption), and ends with the step at whose end a request
// completes. Checked in both modes, to the nanosecond.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <fmt/format.h>

#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
namespace fs = std::filesystem;

using test::iteration_ns;

TEST_CASE(
    "decode aggregate: a waiting long prompt, a crossing counted in aggregate, a shortage, by hand",
    "[engine][fast_forward]") {
  const fs::path base = fs::temp_directory_path() / fmt::format("kvsim-aggregate-{}", ::getpid());
  fs::create_directories(base);
  {
    // A and B: 16-token prompts, 40 output tokens; C: a 100-token prompt, 2 output tokens.
    std::ofstream t(base / "trace.csv");
    t << "arrival_s,prompt_tokens,output_tokens\n0,16,40\n0,16,40\n0,100,2\n";
  }
  const std::string yaml = fmt::format(R"(
name: aggregate-hand
model: llama-3-8b
gpu: a100-sxm4-80gb
engine:
  chunked_prefill: true
  max_num_batched_tokens: 64
  kv: {{type: paged, block_size: 16, num_blocks: 7}}
workload:
  trace: {{path: {}}}
policies: [{{name: p, guards: []}}]
)",
                                       (base / "trace.csv").string());
  const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "t.yaml"), Catalog::builtin());
  const Catalog& catalog = Catalog::builtin();
  const LatencyModel lat(catalog.model("llama-3-8b"), catalog.gpu("a100-sxm4-80gb"),
                         default_profile(catalog.gpu("a100-sxm4-80gb")), AttentionKind::kFlash);

  // Iteration 1 prefills A and B whole (16 tokens, 1 block each); C's whole sequence needs
  // ceil(100 / 16) = 7 blocks, more than the 5 free: C waits (full-sequence admission), though
  // its first chunk would fit. A and B have their first token.
  BatchShape it1;
  it1.block_tokens = 16;
  it1.prefill = {{16, 0, true}, {16, 0, true}};
  const SimTime t1 = iteration_ns(lat, it1);
  // Decode step j (iteration j + 1) plans A and B at target 16 + j. Step 1: targets 17 start a
  // 2nd block each (3 free). Step 17: targets 33 start a 3rd block each, full ones (A's and B's
  // max_total is 56): a crossing counted in aggregate, 1 free. Step 33: targets 49 start their
  // last, partial blocks: A takes the last free one; B finds none and preempts the newest running
  // request, itself (its 3 blocks back: 3 free), and the step admits nothing (it preempted).
  // Steps 33-39 run A alone (targets 49-55); B waits first in line, its 16 + 33 = 49 tokens
  // needing 4 blocks; step 39 makes A's 40th token: A completes at its end (7 free).
  auto decode = [&](int64_t seqs, int64_t context) {
    BatchShape d;
    d.block_tokens = 16;
    d.decode_seqs = seqs;
    d.decode_context_tokens = context;
    return iteration_ns(lat, d);
  };
  SimTime t_a = t1;
  for (int64_t j = 1; j <= 32; ++j) t_a += decode(2, 2 * (16 + j));
  for (int64_t j = 33; j <= 39; ++j) t_a += decode(1, 16 + j);
  // B recomputes its 49 tokens in one chunk (its 34th token; C's 7 blocks still exceed the 3
  // free), then decodes targets 50-55 (its 35th to 40th tokens, inside its 4th block).
  BatchShape b1;
  b1.block_tokens = 16;
  b1.prefill = {{49, 0, true}};
  SimTime t_b = t_a + iteration_ns(lat, b1);
  for (int64_t target = 50; target <= 55; ++target) t_b += decode(1, target);
  // C then runs alone: chunks of 64 and 36, the second giving its first token, then one decode
  // step at target 101 (inside its 7th block).
  BatchShape c1, c2;
  c1.block_tokens = c2.block_tokens = 16;
  c1.prefill = {{64, 0, false}};
  c2.prefill = {{36, 64, true}};
  const SimTime t_c = t_b + iteration_ns(lat, c1) + iteration_ns(lat, c2) + decode(1, 101);
  // Iterations: 1 + 39 + 1 + 6 + 3 = 50. In closed form: steps 1-32 (after iteration 1 C is
  // blocked: 7 blocks needed, 5 free, and free blocks only shrink), not step 33 (its blocks might
  // not all be free), steps 34-39 (B waits for 4 blocks with 3 free; step 39 completes A), B's
  // 6 decode steps (C waits for 7 with 3 free; the last completes B): 32 + 6 + 6 = 44. Not C's
  // decode step: C is due (it just joined), a due member is counted as needing up to one new
  // block, and none is free (C holds all 7). Steps 2-32 are one quiet run, recorded at once
  // (Recorder::on_decode_run): step 1 grows A and B through the ledger (they just joined), no
  // member is due before step 33, none completes before step 39, no event comes, and step 17's
  // two crossings find the 3 free blocks. The later stretches are too short for a run (fewer
  // than 8 steps before the completing one): 31 quiet steps. No sample inside: the stretches are
  // only the engine's.
  test::in_both_modes(s, base, [&](bool ff, const PolicySummary& p, const fs::path& dir) {
    CHECK(p.iterations == 50);
    CHECK(p.fast_forward_iterations == (ff ? 44 : 0));
    CHECK(p.quiet_iterations == (ff ? 31 : 0));
    CHECK(p.preemptions == 1);
    CHECK(test::count(p, Outcome::kCompleted) == 3);
    const std::string requests = test::file_text(dir / "requests.csv");
    const std::string ttft = fmt::format("{:.6f}", sim_to_seconds(t1));
    // A and B: TTFT t1; A: E2E t_a, no preemption; B: E2E t_b, one preemption; C: E2E t_c.
    for (const char* id : {"0", "1"}) {
      CHECK(requests.find(fmt::format("p,{},0.000000,16,16,40,40,completed,{},", id, ttft)) !=
            std::string::npos);
    }
    CHECK(requests.find(fmt::format(",{:.6f},0,0,", sim_to_seconds(t_a))) != std::string::npos);
    CHECK(requests.find(fmt::format(",{:.6f},1,0,", sim_to_seconds(t_b))) != std::string::npos);
    CHECK(requests.find("p,2,0.000000,100,100,2,2,completed,") != std::string::npos);
    CHECK(requests.find(fmt::format(",{:.6f},0,0,", sim_to_seconds(t_c))) != std::string::npos);
  });
  fs::remove_all(base);
}
