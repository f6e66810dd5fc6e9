// One test per guard and action.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::count;
using kvsim::test::run_yaml;

namespace {

// A naive server with no context limit (max_model_len past the model's 32,768 positions): prompts
// up to 65,536 (+ 4) tokens reach the guards.
std::string scenario(const std::string& guards, int64_t prompt, int64_t requests = 3,
                     const std::string& kv = "{type: caching_allocator, growth: preallocate}") {
  return fmt::format(R"(
name: g
model: seed-7b-mha
gpu: a100-sxm4-80gb
engine: {{kv: {}, restart_s: 10, max_model_len: 65540, allow_long_max_model_len: true}}
workload:
  arrivals: {{type: fixed, rate: 1000}}
  max_requests: {}
  prompt_tokens: {}
  output_tokens: 4
policies: [{{name: p, guards: {}}}]
)",
                     kv, requests, prompt, guards);
}

}  // namespace

TEST_CASE("kv_guard reject: 429 once its own estimate leaves less than the margin", "[guards]") {
  // 79.15 GiB - 0.4 context - 14.9 weights - 0.5 workspace ~ 63.3 GiB free; each 32k request is
  // 16 GiB by the guard's estimate: free - 16 >= 60 fails at once with a 60 GiB margin.
  auto p = run_yaml(scenario("[{type: kv_guard, safety_margin_gb: 60}]", 32768)).policies[0];
  CHECK(count(p, Outcome::kRejected) == 3);
  auto ok = run_yaml(scenario("[{type: kv_guard, safety_margin_gb: 10}]", 8192)).policies[0];
  CHECK(count(ok, Outcome::kCompleted) == 3);
}

TEST_CASE("kv_guard truncate keeps max_safe_len tokens and counts what it dropped", "[guards]") {
  auto p =
      run_yaml(
          scenario(
              "[{type: kv_guard, safety_margin_gb: 60, on_fail: truncate, max_safe_len: 4096}]",
              32768, 1))
          .policies[0];
  CHECK(count(p, Outcome::kCompletedTruncated) == 1);
  CHECK(p.tokens_dropped == 32768 - 4096);
}

TEST_CASE("kv_guard adaptive truncation fits the budget", "[guards]") {
  auto p =
      run_yaml(
          scenario(
              "[{type: kv_guard, safety_margin_gb: 50, on_fail: truncate, max_safe_len: adaptive}]",
              65536, 1))
          .policies[0];
  CHECK(count(p, Outcome::kCompletedTruncated) == 1);
  // (free - 50 GiB) / 512 KiB per token: about 26k tokens kept of 65,536.
  CHECK(p.tokens_dropped > 30000);
  CHECK(p.tokens_dropped < 45000);
}

TEST_CASE("kv_guard queue with a timeout times out what never fits", "[guards]") {
  auto p =
      run_yaml(scenario("[{type: kv_guard, safety_margin_gb: 70, on_fail: queue, timeout_s: 2}]",
                        32768, 2))
          .policies[0];
  CHECK(count(p, Outcome::kTimedOut) == 2);
}

TEST_CASE("max_model_len rejects or truncates", "[guards]") {
  auto rej =
      run_yaml(scenario("[{type: max_model_len, max_model_len: 8192}]", 16384, 2)).policies[0];
  CHECK(count(rej, Outcome::kRejectedTooLong) == 2);
  auto tr = run_yaml(scenario("[{type: max_model_len, max_model_len: 8192, on_fail: truncate}]",
                              16384, 1))
                .policies[0];
  CHECK(count(tr, Outcome::kCompletedTruncated) == 1);
  CHECK(tr.tokens_dropped == 16384 - (8192 - 4));
}

TEST_CASE("max_inflight queues the rest and serves them all", "[guards]") {
  auto p = run_yaml(scenario("[{type: max_inflight, max_inflight: 1}]", 1024, 4)).policies[0];
  CHECK(count(p, Outcome::kCompleted) == 4);
  auto r = run_yaml(scenario("[{type: max_inflight, max_inflight: 1, on_fail: reject}]", 1024, 4))
               .policies[0];
  CHECK(count(r, Outcome::kRejected) >= 1);
}

TEST_CASE("watermark admits what keeps free blocks above the mark, rejects the impossible",
          "[guards]") {
  auto ok = run_yaml(scenario("[{type: watermark, watermark: 0.01}]", 4096, 3, "{type: paged}"))
                .policies[0];
  CHECK(count(ok, Outcome::kCompleted) == 3);
  auto never = run_yaml(scenario("[{type: watermark, watermark: 0.99}]", 4096, 1, "{type: paged}"))
                   .policies[0];
  CHECK(count(never, Outcome::kRejectedTooLong) == 1);
}

TEST_CASE("a watermark guard on a store without blocks is a config error at its type",
          "[guards][config]") {
  // It used to admit everything silently on a non-paged store. Fails if make_guards() stops
  // checking the guard registry's needs against the KV store registry's capabilities.
  for (const char* kv : {"{type: caching_allocator, growth: preallocate}", "{type: contiguous}"}) {
    INFO("kv " << kv);
    const std::string kv_type = std::string(kv).substr(7, std::string(kv).find_first_of(",}") - 7);
    CHECK_THROWS_WITH(
        run_yaml(scenario("[{type: watermark}]", 128, 1, kv)),
        Catch::Matchers::Contains(
            "test.yaml:11:38: policies[0].guards[0].type: the watermark guard needs a paged KV "
            "store; this policy's engine.kv.type is " +
            kv_type));
  }
  CHECK_NOTHROW(run_yaml(scenario("[{type: watermark}]", 128, 1, "{type: paged}")));
}

TEST_CASE("reserve on the caching allocator budgets what torch may ever hold, not its segments now",
          "[guards]") {
  // A 1,024-token request arrives at 1 ms and holds (1024 + 4) x 0.5 MiB = 514 MiB of KV segments;
  // a 8,192-token one arrives at 2 ms and needs (8192 + 4) x 0.5 MiB = 4,098 MiB worst case.
  // The budget is the A100-80GB's memory less context, 16 GB of weights, 0.5 GiB of workspace
  // and the profiled activation peak: tens of GB, so both fit at once and both complete. Read
  // against the allocator's segments of the moment (514 MiB plus its cache), the second looked
  // larger than the server and was refused as too long.
  const std::string yaml = R"(
name: reserve-budget
model: seed-7b-mha
gpu: a100-sxm4-80gb
engine: {kv: {type: caching_allocator, growth: preallocate}}
workload:
  arrivals: {type: fixed, rate: 1000}
  max_requests: 1
  prompt_tokens: 1024
  output_tokens: 4
  bursts: [{at_s: 0.002, count: 1, prompt_tokens: 8192, output_tokens: 4}]
policies: [{name: p, guards: [{type: reserve}]}]
)";
  auto p = run_yaml(yaml).policies[0];
  CHECK(count(p, Outcome::kRejectedTooLong) == 0);
  CHECK(count(p, Outcome::kCompleted) == 2);
}
