// The decode aggregate (sim/serving/lazy_decodes.h) and the fast-forward around it, on a case
// worked out by hand: two decoding requests and a chunked prefill that stalls for blocks, in a
// pool of eight 16-token blocks. The stretch runs through the stalled prefill, counts a block
// crossing in aggregate, stops before the crossing that runs short (a preemption), and ends with
// the step at whose end both requests complete. Checked in both modes, to the nanosecond.
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

TEST_CASE("decode aggregate: a stalled prefill, a crossing counted in aggregate, a shortage, by hand",
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
  kv: {{type: paged, block_size: 16, num_blocks: 8}}
workload:
  trace: {{path: {}}}
policies: [{{name: p, guards: []}}]
)",
                                       (base / "trace.csv").string());
  const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "t.yaml"), Catalog::builtin());
  const Catalog& catalog = Catalog::builtin();
  const LatencyModel lat(catalog.model("llama-3-8b"), catalog.gpu("a100-sxm4-80gb"),
                         default_profile(catalog.gpu("a100-sxm4-80gb")), AttentionKind::kFlash);

  // Iteration 1 prefills A and B whole (16 tokens, 1 block each) and C's first chunk of
  // 64 - 32 = 32 tokens (2 blocks): 4 of 8 blocks free; A and B have their first token.
  BatchShape it1;
  it1.block_tokens = 16;
  it1.prefill = {{16, 0, true}, {16, 0, true}, {32, 0, false}};
  const SimTime t1 = iteration_ns(lat, it1);
  // Decode step j (iteration j + 1) plans A and B at target 16 + j, context 2 (16 + j).
  // Step 1: targets 17 start a 2nd block each (2 free). C's next chunk, min(100 - 32, 64 - 2) =
  // 62 tokens, needs blocks for 94 tokens: 6 - 2 = 4 > 2 free: C stalls, and stays stalled while
  // free blocks only shrink. Step 17: targets 33 start a 3rd block each, full ones (A's and B's
  // max_total is 56): a crossing counted in aggregate, 0 free. Step 33: targets 49 start their
  // last, partial blocks (49..64 past 56), with none free: A preempts the newest running request,
  // C (2 blocks back: A and B take one each). Step 39 plans targets 55 and makes A's and B's 40th
  // tokens: both complete at its end.
  auto decode = [&](int64_t j) {
    BatchShape d;
    d.block_tokens = 16;
    d.decode_seqs = 2;
    d.decode_context_tokens = 2 * (16 + j);
    return iteration_ns(lat, d);
  };
  SimTime t_ab = t1;
  for (int64_t j = 1; j <= 39; ++j) t_ab += decode(j);
  // C then runs alone: chunks of 64 and 36 (its recompute from the start), the second giving its
  // first token, then one decode step at target 101 (its 7th block).
  BatchShape c1, c2, c3;
  c1.block_tokens = c2.block_tokens = c3.block_tokens = 16;
  c1.prefill = {{64, 0, false}};
  c2.prefill = {{36, 64, true}};
  c3.decode_seqs = 1;
  c3.decode_context_tokens = 101;
  const SimTime t_c = t_ab + iteration_ns(lat, c1) + iteration_ns(lat, c2) + iteration_ns(lat, c3);
  // Iterations: 1 + 39 + 3 = 43. In closed form: steps 2-32 (after step 1, which had C's chunk
  // still possible to plan: 4 blocks needed, 4 free at its start), not step 33 (its blocks might
  // not all be free), steps 34-39 (C waits for 4 blocks with none free; step 39 completes A and
  // B), and C's decode step, which completes it: 31 + 6 + 1 = 38. Steps 2-32 are one quiet run,
  // recorded at once (Recorder::on_decode_run): no member is due before step 33, none completes
  // before step 39, no event comes, and step 17's two crossings find the 2 free blocks. Steps
  // 34-38 are too few for a run (fewer than 8 before the completing step 39): 31 quiet steps.
  // No sample inside: the stretches are only the engine's.
  test::in_both_modes(s, base, [&](bool ff, const PolicySummary& p, const fs::path& dir) {
    CHECK(p.iterations == 43);
    CHECK(p.fast_forward_iterations == (ff ? 38 : 0));
    CHECK(p.quiet_iterations == (ff ? 31 : 0));
    CHECK(p.preemptions == 1);
    CHECK(test::count(p, Outcome::kCompleted) == 3);
    const std::string requests = test::file_text(dir / "requests.csv");
    const std::string ttft = fmt::format("{:.6f}", sim_to_seconds(t1));
    // A and B: TTFT t1, E2E t_ab, no preemption; C: one preemption, E2E t_c.
    for (const char* id : {"0", "1"}) {
      CHECK(requests.find(fmt::format("p,{},0.000000,16,16,40,40,completed,{},", id, ttft)) !=
            std::string::npos);
    }
    CHECK(requests.find(fmt::format(",{:.6f},0,0,", sim_to_seconds(t_ab))) != std::string::npos);
    CHECK(requests.find("p,2,0.000000,100,100,2,2,completed,") != std::string::npos);
    CHECK(requests.find(fmt::format(",{:.6f},1,0,", sim_to_seconds(t_c))) != std::string::npos);
  });
  fs::remove_all(base);
}
