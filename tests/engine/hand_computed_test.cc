// Scenarios small enough to work out by hand: exact outcomes.
#include <catch2/catch.hpp>

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
engine: {{kv: {}, on_oom: crash, restart_s: 10}}
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

TEST_CASE("two requests that cannot both fit: the second OOMs without a guard", "[engine][golden]") {
  auto r = run_yaml(two_requests("{type: caching_allocator, growth: preallocate}",
                                 "[{name: none, guards: []}]"));
  const PolicySummary& p = r.policies.at(0);
  CHECK(p.requests_total == 2);
  CHECK(p.oom_events == 1);
  CHECK(p.restarts == 1);
  CHECK(count(p, Outcome::kLostOom) == 2);  // the crash takes the running one with it
  CHECK(p.availability == 0.0);
}

TEST_CASE("the reserve guard rejects the second, or queues it until the first is done",
          "[engine][golden]") {
  auto r = run_yaml(two_requests(
      "{type: caching_allocator, growth: preallocate}",
      "[{name: reject, guards: [{type: reserve, on_fail: reject}]}, {name: queue, guards: [{type: reserve}]}]"));
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
engine: {kv: {type: caching_allocator}, restart_s: 5}
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
