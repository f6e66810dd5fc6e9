// The fast-forward (FastForward, sim/serving/fast_forward/; docs/fast-forward.md) on batches worked
// out by hand: three requests arrive together, prefill in one iteration, then decode in a pool of
// six 16-token blocks that runs short at a known step (completion times, the preemption, the
// iteration count and the KV held at a sample time); and the stretches of static batching and
// vllm_v0 (iterations, closed-form and quiet steps, every E2E). Checked in both modes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
namespace fs = std::filesystem;

namespace {

// Requests 0, 1, 2 at t = 0 with prompts 12, 20, 40 and 28, 28, 30 output tokens; llama-3-8b
// (128 KiB of KV per token) on an A100-80GB, a paged store of exactly 6 blocks of 16 tokens.
std::string scenario(const fs::path& trace) {
  return fmt::format(R"(
name: ff-hand
model: llama-3-8b
gpu: a100-sxm4-80gb
engine:
  kv: {{type: paged, block_size: 16, num_blocks: 6}}
workload:
  trace: {{path: {}}}
policies: [{{name: p, guards: []}}]
)",
                     trace.string());
}

// The engine's decode step of `seqs` sequences with contexts summing to `context`.
SimTime decode_step(const LatencyModel& m, int64_t seqs, int64_t context) {
  BatchShape s;
  s.block_tokens = 16;
  s.decode_seqs = seqs;
  s.decode_context_tokens = context;
  return test::iteration_ns(m, s);
}

}  // namespace

TEST_CASE("fast-forward: completion times, the first block shortage and a sample, by hand",
          "[engine][fast_forward]") {
  const fs::path base = fs::temp_directory_path() / fmt::format("kvsim-ffhand-{}", ::getpid());
  fs::create_directories(base);
  {
    std::ofstream t(base / "trace.csv");
    t << "arrival_s,prompt_tokens,output_tokens\n0,12,28\n0,20,28\n0,40,30\n";
  }
  const Scenario s = load_scenario(ConfigNode::parse_string(scenario(base / "trace.csv"), "t.yaml"),
                                   Catalog::builtin());
  const Catalog& catalog = Catalog::builtin();
  const ModelSpec model = catalog.model("llama-3-8b");
  const GpuSpec gpu = catalog.gpu("a100-sxm4-80gb");
  const LatencyModel lat(model, gpu, default_profile(gpu), AttentionKind::kFlash);

  // Iteration 1 prefills all three (76 tokens; the whole prompts fit the 16,384 budget) and gives
  // each its first token: TTFT = t1. The prompts hold 1 + 2 + 3 = 6 blocks: none is free.
  BatchShape pre;
  pre.block_tokens = 16;
  pre.prefill = {{12, 0, true}, {20, 0, true}, {40, 0, true}};
  const SimTime t1 = test::iteration_ns(lat, pre);
  // Decode step j (j = 1, 2, ...) plans with generated = j, so request i's target is
  // prompt_i + j: contexts 12 + j, 20 + j, 40 + j. Each window ends at its block boundary:
  // request 0 needs a 2nd block at 12 + j = 17 (j = 5), request 2 a 4th at 40 + j = 49 (j = 9),
  // request 1 a 3rd at 20 + j = 33 (j = 13). So steps 1-4 run three requests (context
  // 72 + 3j) in one fast-forward stretch; step 5 finds no free block for request 0 and
  // preempts the newest, request 2 (its 3 blocks back, 1 of them to request 0: 2 free), which
  // then waits for its recompute (45 tokens = 3 blocks > 2 free) until the others end.
  SimTime t5 = t1;
  for (int64_t j = 1; j <= 4; ++j) t5 += decode_step(lat, 3, 72 + 3 * j);
  // Steps 5-27 run requests 0 and 1 (context 32 + 2j); request 1 takes a free block at
  // j = 13 and request 0 the last one at 12 + j = 33 (j = 21). Their last targets, 12 + 27 and
  // 20 + 27 = 47, stay inside their 3 blocks (48 tokens): both have 28 tokens after step 27.
  // (With 30 output tokens request 1 would need a 4th block at step 29 and be preempted too.)
  SimTime t27 = t5;
  for (int64_t j = 5; j <= 27; ++j) t27 += decode_step(lat, 2, 32 + 2 * j);
  // A sample inside the first stretch, between the ends of steps 2 and 3, sees steps 1-2 done
  // and step 3 in flight (planned: its tokens counted): 12 + 20 + 40 + 3 x 3 = 81 tokens live,
  // 6 blocks held (96 tokens), 128 KiB each.
  const SimTime t2 = t1 + decode_step(lat, 3, 75) + decode_step(lat, 3, 78);
  const SimTime t3 = t2 + decode_step(lat, 3, 81);
  const double sample_s = sim_to_seconds(t2 + (t3 - t2) / 2);
  const int64_t kv_token_bytes = 131072;  // 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes

  const auto check = [&](bool ff, const PolicySummary& p, const fs::path& dir) {
    CHECK(p.preemptions == 1);
    CHECK(test::count(p, Outcome::kCompleted) == 3);
    // Fast-forward runs steps 1-4 in closed form (stopping before step 5, the shortage) and,
    // after the preemption, steps 6-26 (step 5 is real; step 27 completes both requests; the
    // samples at 2, 3, 4... x sample_s each end a stretch early, so at least that many).
    if (ff) {
      CHECK(p.fast_forward_iterations >= 4);
    } else {
      CHECK(p.fast_forward_iterations == 0);
    }
    const std::string requests = test::file_text(dir / "requests.csv");
    // TTFT t1 for all three; requests 0 and 1 end at t27 after 28 tokens, request 2 was
    // preempted once.
    const std::string ttft = fmt::format("{:.6f}", sim_to_seconds(t1));
    const std::string e2e = fmt::format("{:.6f}", sim_to_seconds(t27));
    CHECK(requests.find(fmt::format("p,0,0.000000,12,12,28,28,completed,{},", ttft)) !=
          std::string::npos);
    CHECK(requests.find(fmt::format("p,1,0.000000,20,20,28,28,completed,{},", ttft)) !=
          std::string::npos);
    // e2e_s, preemptions, tokens_dropped, then the latency breakdown's five cells.
    CHECK(requests.find(fmt::format(",{},0,0,", e2e)) != std::string::npos);
    CHECK(requests.find("p,2,0.000000,40,40,30,30,completed,") != std::string::npos);
    CHECK(requests.find(",1,0,") != std::string::npos);  // request 2's one preemption
    // The first sample row after t = 0: live KV 81 tokens, the rest of the 6 blocks waste.
    const std::string ts = test::file_text(dir / "timeseries.csv");
    const std::string row = fmt::format("p,{:.3f},", sample_s);
    const auto at = ts.find(row);
    REQUIRE(at != std::string::npos);
    const std::string line = ts.substr(at, ts.find('\n', at) - at);
    CHECK(line.find(fmt::format(",{},{},", 81 * kv_token_bytes, 15 * kv_token_bytes)) !=
          std::string::npos);
  };
  test::in_both_modes(s, base, check, sample_s);
  fs::remove_all(base);
}

// Static batching and vllm_v0 fast-forward too (Scheduler::admits_nothing): a static batch
// decodes to its end admitting nothing, and vllm_v0 decodes only when no whole prompt can be
// admitted. Requests 0, 1, 2 at t = 0, 16-token prompts, 10, 60 and 5 output tokens; blocks of
// 16 tokens, plenty of them.
//   static, batch_size 2: iteration 1 prefills 0 and 1 (P2); decode step j plans targets 16 + j.
//     Steps 1-9 run both (context 2 (16 + j)); request 0 makes its 10th token at the end of step
//     9. Steps 10-59 run request 1 alone (context 16 + j); it ends at step 59. Then request 2:
//     its prefill (P1), 4 decode steps (context 16 + j). 1 + 59 + 1 + 4 = 65 iterations, of
//     which every decode step in closed form: 63.
//   quiet runs: a member is due at its first step (step 1: all new), at its crossing into its
//     last, partial block (request 0: 17..32, step 1; request 1, max_total 76: 65..80, step 49;
//     request 2: step 1), and its completing step runs one by one. Runs need 8 steps: after
//     step 1, steps 2-8 are 7 (step 9 completes); after step 9, steps 10-48 (39; step 49 is
//     due); after it, steps 50-58 (9; step 59 completes). Request 2's steps 2-3: too few.
//     Quiet: 39 + 9 = 48.
//   vllm_v0 (max_num_seqs 256): iteration 1 prefills all three (P3); steps 1-4 run three
//     (context 3 (16 + j)), step 4 ends request 2; steps 5-9 two; steps 10-59 one. 60
//     iterations, 59 in closed form; the same quiet runs after step 9: 48.
TEST_CASE("static batching and vllm_v0 fast-forward their decode stretches, by hand",
          "[engine][fast_forward]") {
  const fs::path base = fs::temp_directory_path() / fmt::format("kvsim-ffsched-{}", ::getpid());
  fs::create_directories(base);
  {
    std::ofstream t(base / "trace.csv");
    t << "arrival_s,prompt_tokens,output_tokens\n0,16,10\n0,16,60\n0,16,5\n";
  }
  const Catalog& catalog = Catalog::builtin();
  const GpuSpec gpu = catalog.gpu("a100-sxm4-80gb");
  const LatencyModel lat(catalog.model("llama-3-8b"), gpu, default_profile(gpu),
                         AttentionKind::kFlash);
  const auto prefill = [&](int n) {
    BatchShape s;
    s.block_tokens = 16;
    s.prefill.assign(static_cast<size_t>(n), PrefillChunk{16, 0, true});
    return test::iteration_ns(lat, s);
  };
  const auto steps = [&](int64_t n, int64_t from, int64_t to) {  // decode steps from..to
    SimTime t = 0;
    for (int64_t j = from; j <= to; ++j) t += decode_step(lat, n, n * (16 + j));
    return t;
  };
  struct Case {
    const char* scheduler;
    SimTime e2e0, e2e1, e2e2;
    int64_t iterations, closed, quiet;
  };
  const SimTime s0 = prefill(2) + steps(2, 1, 9);
  const SimTime s1 = s0 + steps(1, 10, 59);
  const SimTime v2 = prefill(3) + steps(3, 1, 4);
  const SimTime v0 = v2 + steps(2, 5, 9);
  const Case cases[] = {
      {"static", s0, s1, s1 + prefill(1) + steps(1, 1, 4), 65, 63, 48},
      {"vllm_v0", v0, v0 + steps(1, 10, 59), v2, 60, 59, 48},
  };
  for (const Case& c : cases) {
    const std::string yaml = fmt::format(R"(
name: ff-sched
model: llama-3-8b
gpu: a100-sxm4-80gb
engine:
  scheduler: {}
  batch_size: 2
  kv: {{type: paged, block_size: 16, num_blocks: 64}}
workload:
  trace: {{path: {}}}
policies: [{{name: p, guards: []}}]
)",
                                         c.scheduler, (base / "trace.csv").string());
    const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "t.yaml"), catalog);
    INFO(c.scheduler);
    const auto check = [&](bool ff, const PolicySummary& p, const fs::path& dir) {
      CHECK(p.iterations == c.iterations);
      CHECK(p.fast_forward_iterations == (ff ? c.closed : 0));
      CHECK(p.quiet_iterations == (ff ? c.quiet : 0));
      const std::string requests = test::file_text(dir / "requests.csv");
      const SimTime e2e[] = {c.e2e0, c.e2e1, c.e2e2};
      const int64_t out[] = {10, 60, 5};
      for (int i = 0; i < 3; ++i) {
        // ... output_tokens, generated, outcome, ttft, tpot, e2e, preemptions (0), ...
        CHECK(requests.find(fmt::format("p,{},0.000000,16,16,{},{},completed,", i, out[i],
                                        out[i])) != std::string::npos);
        CHECK(requests.find(fmt::format(",{:.6f},0,0,", sim_to_seconds(e2e[i]))) !=
              std::string::npos);
      }
    };
    test::in_both_modes(s, base, check, 1000, std::string(c.scheduler) + "-");  // no sample inside
  }
  fs::remove_all(base);
}
