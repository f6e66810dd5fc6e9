// Scenarios small enough to work out by hand: exact outcomes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>

#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::count;
using kvsim::test::run_yaml;

namespace {

std::string two_requests(const std::string& kv, const std::string& policies) {
  return fmt::format(R"(
name: two
model: seed-7b-mha
gpu: {}
# max_model_len: the requests' 16,384 + 16 tokens, so the unchunked batch (and the profile run
# that sizes a paged store) is 16,400 tokens rather than the model's 32,768.
engine: {{kv: {}, on_oom: crash, restart_s: 10, max_model_len: 16400}}
workload:
  arrivals: {{type: fixed, rate: 100}}
  max_requests: 2
  prompt_tokens: 16384
  output_tokens: 16
policies: {}
)",
                     kvsim::test::kSmallGpu, kv, policies);
}

}  // namespace

TEST_CASE("two requests that cannot both fit: the second OOMs without a guard",
          "[engine][golden]") {
  auto r = run_yaml(
      two_requests("{type: caching_allocator, growth: preallocate}", "[{name: none, guards: []}]"));
  const PolicySummary& p = r.policies.at(0);
  CHECK(p.requests_total == 2);
  CHECK(p.oom_events == 1);
  CHECK(p.restarts == 1);
  CHECK(count(p, Outcome::kLostOom) == 2);  // the crash takes the running one with it
  CHECK(p.availability == 0.0);
}

TEST_CASE("the reserve guard rejects the second, or queues it until the first is done",
          "[engine][golden]") {
  auto r = run_yaml(two_requests("{type: caching_allocator, growth: preallocate}",
                                 "[{name: reject, guards: [{type: reserve, on_fail: reject}]}, "
                                 "{name: queue, guards: [{type: reserve}]}]"));
  const PolicySummary& rej = r.policies.at(0);
  CHECK(rej.oom_events == 0);
  CHECK(count(rej, Outcome::kCompleted) == 1);
  CHECK(count(rej, Outcome::kRejected) == 1);
  const PolicySummary& q = r.policies.at(1);
  CHECK(q.oom_events == 0);
  CHECK(count(q, Outcome::kCompleted) == 2);
  CHECK(q.e2e.p99 > q.e2e.p50);  // the second waited for the first
}

TEST_CASE("a paged store waits for blocks instead of crashing", "[engine]") {
  auto r = run_yaml(two_requests("{type: paged, block_size: 16}", "[{name: paged, guards: []}]"));
  const PolicySummary& p = r.policies.at(0);
  CHECK(p.oom_events == 0);
  CHECK(count(p, Outcome::kCompleted) == 2);
}

TEST_CASE("on_oom: abort_request loses only the request that did not fit", "[engine]") {
  std::string y = two_requests("{type: caching_allocator, growth: preallocate}",
                               "[{name: abort, guards: [], engine: {on_oom: abort_request}}]");
  auto r = run_yaml(y);
  const PolicySummary& p = r.policies.at(0);
  CHECK(p.oom_events == 1);
  CHECK(p.restarts == 0);
  CHECK(count(p, Outcome::kLostOom) == 1);
  CHECK(count(p, Outcome::kCompleted) == 1);
}

TEST_CASE("one 32k prompt OOMs under native attention whatever the KV guard says", "[engine]") {
  auto r = run_yaml(R"(
name: native
model: seed-7b-mha
gpu: a100-sxm4-80gb
# A naive server: no context limit, 32,768 + 8 tokens reach the model.
engine: {kv: {type: caching_allocator}, restart_s: 5, max_model_len: 32776, allow_long_max_model_len: true}
workload:
  arrivals: {type: fixed, rate: 1}
  max_requests: 1
  prompt_tokens: 32768
  output_tokens: 8
policies:
  - {name: native, engine: {attention: native}, guards: [{type: kv_guard, safety_margin_gb: 10}]}
  - {name: flash, engine: {attention: flash}, guards: [{type: kv_guard, safety_margin_gb: 10}]}
)");
  CHECK(r.policies.at(0).oom_events == 1);
  CHECK(count(r.policies.at(0), Outcome::kLostOom) == 1);
  CHECK(r.policies.at(1).oom_events == 0);
  CHECK(count(r.policies.at(1), Outcome::kCompleted) == 1);
}

namespace {

// One policy's summary, checked: runs `yaml` without writing files.
PolicySummary only_policy(const std::string& yaml) {
  const RunResult r = run_yaml(yaml);
  REQUIRE(r.policies.size() == 1);
  return r.policies.at(0);
}

}  // namespace

// max_inflight: 1 admits request 0 at t=0; requests 1..9 arrive at 0.1 .. 0.9 s
// while it runs. Request 1 finds the guard queue empty, is checked and queued (timeout 2 s);
// requests 2..9 find it non-empty and queue behind it, each with its own 2 s timeout from its
// arrival. Request 0 (1,000 + 500 tokens on Llama-2-7B, 13.5 GB of FP16 weights) needs 499 decode
// steps, each reading every weight at least once: >= 13.5e9 B / 2,039e9 B/s = 6.6 ms, so it ends
// after >= 3.3 s, later than the last timeout (0.9 + 2 = 2.9 s). Hence 1 completed, 9 timed out;
// the engine's own figure for request 0 is checked against the same bound.
TEST_CASE("every request waiting in a guard queue gets its own timeout", "[engine][golden]") {
  const PolicySummary p = only_policy(R"(
name: timeouts
model: llama-2-7b
gpu: a100-sxm4-80gb
workload:
  arrivals: {type: fixed, rate: 10}
  max_requests: 10
  prompt_tokens: 1000
  output_tokens: 500
policies:
  - {name: q, guards: [{type: max_inflight, max_inflight: 1, on_fail: queue, timeout_s: 2}]}
)");
  CHECK(p.requests_total == 10);
  CHECK(count(p, Outcome::kCompleted) == 1);
  CHECK(count(p, Outcome::kTimedOut) == 9);
  REQUIRE(p.e2e.count == 1);
  CHECK(p.e2e.p50 > 2.9);
}

namespace {

std::string four_at_once(const std::string& workload, const std::string& engine) {
  return fmt::format(R"(
name: together
model: llama-2-7b
gpu: a100-sxm4-80gb
engine: {}
workload: {}
policies: [{{name: p, guards: []}}]
)",
                     engine, workload);
}

// Four requests of 100 + 8 tokens that arrive together: batched together, they take 8 forward
// passes (one prefill of all four that yields each one's first token, then 7 decodes of four)
// and share one TTFT. Before the fix the first one was prefilled alone: static batching took
// 8 + 8 = 16 passes (a batch of 1, then of 3), continuous batching 9 (prefill of 1, then the
// prefill of 3 beside its first decode, then 7 decodes).
void check_batched_together(const PolicySummary& p) {
  CHECK(p.requests_total == 4);
  CHECK(count(p, Outcome::kCompleted) == 4);
  CHECK(p.iterations == 8);
  REQUIRE(p.ttft.count == 4);
  CHECK(p.ttft.p50 == p.ttft.p99);
}

}  // namespace

TEST_CASE("requests that arrive at the same instant are planned together", "[engine][golden]") {
  namespace fs = std::filesystem;
  const fs::path trace = fs::temp_directory_path() / fmt::format("kvsim-same-t-{}.csv", ::getpid());
  {
    std::ofstream out(trace);
    out << "arrival_s,prompt_tokens,output_tokens\n";
    for (int i = 0; i < 4; ++i) out << "0.5,100,8\n";
  }
  const std::string static4 = "{scheduler: static, batch_size: 4}";
  SECTION("trace rows sharing a timestamp, static batching") {
    check_batched_together(only_policy(four_at_once(
        fmt::format("{{trace: {{path: {}, format: normalized}}}}", trace.string()), static4)));
  }
  SECTION("trace rows sharing a timestamp, continuous batching") {
    check_batched_together(only_policy(four_at_once(
        fmt::format("{{trace: {{path: {}, format: normalized}}}}", trace.string()), "{}")));
  }
  SECTION("closed-loop clients starting together, static batching") {
    check_batched_together(only_policy(four_at_once(
        "{clients: {type: closed_loop, count: 4}, max_requests: 4, prompt_tokens: 100, "
        "output_tokens: 8}",
        static4)));
  }
  fs::remove(trace);
}

// One request of 200 + 20 tokens, arriving at 1 s (fixed rate 1/s): duration_s
// runs from the first arrival to the last outcome, so it is that request's end-to-end time
// (0.219 s here), and goodput is its 20 tokens over it (91 tok/s); the sampler, whatever its
// period, changes neither, nor any other summary figure: summary.json is the same byte for byte
// at 0.1, 1 and 7 s. (Before the fix the run ended at the first sample after the request: 1.3,
// 2 and 7 s.)
TEST_CASE("no summary figure depends on the sample interval", "[engine][golden]") {
  namespace fs = std::filesystem;
  const Scenario s = load_scenario(ConfigNode::parse_string(R"(
name: sampling
model: llama-2-7b
gpu: a100-sxm4-80gb
workload:
  arrivals: {type: fixed, rate: 1}
  max_requests: 1
  prompt_tokens: 200
  output_tokens: 20
policies: [{name: p, guards: []}]
)",
                                                            "test.yaml"),
                                   Catalog::builtin());
  const fs::path base = fs::temp_directory_path() / fmt::format("kvsim-sampling-{}", ::getpid());
  std::vector<std::string> summaries;
  for (double interval : {0.1, 1.0, 7.0}) {
    RunOptions o;
    o.sample_interval_s = interval;
    o.out_dir = (base / fmt::format("{}", interval)).string();
    const RunResult r = run_scenario(s, o);
    const PolicySummary& p = r.policies.at(0);
    REQUIRE(p.e2e.count == 1);
    CHECK(p.duration_s == p.e2e.p50);
    CHECK(p.goodput_tokens_per_s == 20.0 / p.duration_s);
    std::ifstream in(fs::path(o.out_dir) / "summary.json", std::ios::binary);
    std::ostringstream b;
    b << in.rdbuf();
    summaries.push_back(b.str());
  }
  CHECK(summaries.at(0).size() > 100);
  CHECK(summaries.at(0) == summaries.at(1));
  CHECK(summaries.at(0) == summaries.at(2));
  fs::remove_all(base);
}
