// The engine's max_model_len (requests refused at arrival as
// rejected_too_long, vLLM's checks on max_model_len and max_num_batched_tokens) and the
// max_queue_time deadline on waiting (guard queue and engine waiting queue). Hand-computed.
#include <catch2/catch.hpp>

#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "models/memory/gpu_memory_pool.h"
#include "sim/engine/event_queue.h"
#include "sim/guards/guard.h"
#include "sim/serving/engine_config.h"
#include "sim/serving/replica.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::count;
using kvsim::test::run_yaml;

namespace {

// One request of `prompt` + `output` tokens on Llama-3-8B (max_position 8192), paged KV.
std::string one_request(int64_t prompt, int64_t output, const std::string& engine_extra = "") {
  return fmt::format(R"(name: len
model: llama-3-8b
gpu: a100-sxm4-80gb
engine:
  kv: {{type: paged}}
{}workload:
  arrivals: {{type: fixed, rate: 1}}
  max_requests: 1
  prompt_tokens: {}
  output_tokens: {}
policies: [{{name: p, guards: []}}]
)",
                     engine_extra, prompt, output);
}

std::string error_of(const std::string& yaml) {
  try {
    run_yaml(yaml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("max_model_len defaults to the model's max_position: longer requests are refused",
          "[engine][limits]") {
  // 8,000 + 200 = 8,200 > 8,192: refused at arrival; 7,992 + 200 = 8,192 <= 8,192: served.
  const PolicySummary too_long = run_yaml(one_request(8000, 200)).policies.at(0);
  CHECK(too_long.requests_total == 1);
  CHECK(count(too_long, Outcome::kRejectedTooLong) == 1);
  CHECK(too_long.iterations == 0);  // refused before the engine ever ran
  const PolicySummary fits = run_yaml(one_request(7992, 200)).policies.at(0);
  CHECK(count(fits, Outcome::kCompleted) == 1);
  CHECK(fits.iterations == 200);  // one prefill (first token) + 199 decodes
}

TEST_CASE("max_model_len above max_position needs allow_long_max_model_len", "[engine][limits]") {
  // 8,200 tokens with max_model_len 8,200 (above 8,192): allowed, it is served. The unchunked
  // batch defaults to max(8,200, 16,384) = 16,384, so it fits one iteration.
  const PolicySummary p = run_yaml(one_request(8000, 200,
                                               "  max_model_len: 8200\n"
                                               "  allow_long_max_model_len: true\n"))
                              .policies.at(0);
  CHECK(count(p, Outcome::kCompleted) == 1);
  // Without the flag: the error at the key (line 6, column 18 of test.yaml).
  const std::string e = error_of(one_request(8000, 200, "  max_model_len: 8200\n"));
  CHECK_THAT(e, Catch::Matchers::StartsWith("test.yaml:6:18: "));
  CHECK_THAT(
      e, Catch::Matchers::Contains("max_model_len 8200 is above llama-3-8b's max_position 8192"));
  CHECK_THAT(e, Catch::Matchers::Contains("allow_long_max_model_len: true"));
}

TEST_CASE("unchunked, max_num_batched_tokens below max_model_len is an error", "[engine][limits]") {
  const std::string e = error_of(one_request(100, 10, "  max_num_batched_tokens: 4096\n"));
  CHECK_THAT(e, Catch::Matchers::StartsWith("test.yaml:6:27: "));
  CHECK_THAT(e,
             Catch::Matchers::Contains("max_num_batched_tokens 4096 is below max_model_len 8192"));
  // Chunked prefill splits prompts: the same budget is fine.
  const PolicySummary p = run_yaml(one_request(100, 10,
                                               "  max_num_batched_tokens: 4096\n"
                                               "  chunked_prefill: true\n"))
                              .policies.at(0);
  CHECK(count(p, Outcome::kCompleted) == 1);
  // And so is a budget that holds the shorter max_model_len.
  CHECK(error_of(one_request(100, 10, "  max_num_batched_tokens: 4096\n  max_model_len: 4096\n")) ==
        "no error");
}

TEST_CASE("resolve_model_limits defaults as vLLM does, with 16,384 as the floor",
          "[engine][limits]") {
  const Catalog& catalog = Catalog::builtin();
  auto resolved = [&](const char* model, const char* engine) {
    const ConfigNode n = ConfigNode::parse_string(engine, "engine.yaml");
    EngineConfig c = parse_engine_config(n);
    resolve_model_limits(c, n, catalog.model(model));
    return c;
  };
  // Llama-3-8B: max_model_len 8,192; the batch max(8,192, 16,384) = 16,384, today's default.
  EngineConfig c = resolved("llama-3-8b", "{}");
  CHECK(c.max_model_len == 8192);
  CHECK(c.max_num_batched_tokens == 16384);
  // seed-7b-mha: 32,768 positions, so an unchunked batch of 32,768 (vLLM: max(max_model_len,
  // 2048)).
  c = resolved("seed-7b-mha", "{}");
  CHECK(c.max_model_len == 32768);
  CHECK(c.max_num_batched_tokens == 32768);
  // Chunked: the budget stays 16,384.
  c = resolved("seed-7b-mha", "{chunked_prefill: true}");
  CHECK(c.max_num_batched_tokens == 16384);
  // The static scheduler never chunks (it has no chunked_prefill key): unchunked rules apply.
  c = resolved("seed-7b-mha", "{scheduler: static, chunked_prefill: true}");
  CHECK(c.max_num_batched_tokens == 32768);
  // engine.max_queue_time_s: seconds > 0, none by default.
  CHECK(!resolved("llama-3-8b", "{}").max_queue_time);
  CHECK(resolved("llama-3-8b", "{max_queue_time_s: 2.5}").max_queue_time ==
        std::optional<SimTime>(2'500'000'000));
  CHECK_THROWS_WITH(resolved("llama-3-8b", "{max_queue_time_s: 0}"),
                    Catch::Matchers::StartsWith("engine.yaml:1:20: "));  // at the 0
}

namespace {

struct Finished {
  Outcome outcome = Outcome::kNone;
  SimTime at = -1;
};

// Runs `specs` through one replica of Llama-2-7B on an A100-80GB (paged KV) and returns each
// request's outcome and end time. `config` is used as given (no model limits resolved unless set).
std::map<int64_t, Finished> run_replica(EngineConfig config, const std::vector<RequestSpec>& specs,
                                        const std::string& guards = "[]") {
  spdlog::set_level(spdlog::level::warn);
  const Catalog& catalog = Catalog::builtin();
  const ModelSpec model = catalog.model("llama-2-7b");
  const GpuSpec gpu = catalog.gpu("a100-sxm4-80gb");
  const PoolOptions options{.workspace_bytes = config.workspace_bytes,
                            .attention = config.attention,
                            .profile_batched_tokens = config.max_num_batched_tokens,
                            .profile_num_seqs = config.max_num_seqs};
  GpuMemoryPool pool(model, gpu, ConfigNode::parse_string("{type: paged}", "kv.yaml"), options);
  const LatencyModel latency(model, gpu, default_profile(gpu), config.attention);
  EventQueue events(EventQueue::Limits{.max_events = 10'000'000});
  Recorder recorder("p");
  Replica replica(events, pool, latency, config,
                  make_guards(ConfigNode::parse_string(guards, "guards.yaml"), model, "paged"),
                  recorder);
  replica.set_check_invariants(true);
  std::map<int64_t, Finished> out;
  replica.set_on_finished(
      [&](const RequestState& r) { out[r.spec.id] = {.outcome = r.outcome, .at = r.finished_at}; });
  for (const RequestSpec& spec : specs) {
    events.schedule_at(spec.arrival, [&replica, spec] { replica.arrive(spec); });
  }
  events.run();
  replica.finish();
  return out;
}

RequestSpec spec(int64_t id, double arrival_s, std::optional<double> deadline_s = std::nullopt) {
  RequestSpec s;
  s.id = id;
  s.arrival = seconds_to_sim(arrival_s);
  s.prompt_tokens = 1000;
  s.output_tokens = 500;
  if (deadline_s) s.max_queue_time = seconds_to_sim(*deadline_s);
  return s;
}

}  // namespace

// max_num_seqs: 1 keeps requests 1..3 in the engine's waiting queue while request 0 runs. Request
// 0 (1,000 + 500 tokens on Llama-2-7B, 13.5 GB of FP16 weights) needs 499 decode steps, each
// reading every weight at least once: >= 13.5e9 B / 2,039e9 B/s = 6.6 ms, so it ends after
// >= 3.3 s. Request 1 (t = 0.1 s, its own deadline 0.5 s) leaves at exactly 0.6 s; request 2
// (t = 0.2 s, no deadline of its own: the engine's 2 s) at exactly 2.2 s; request 3 (t = 0.3 s,
// its own 10 s, which overrides the engine's) is still waiting when request 0 ends and is served.
TEST_CASE("a deadline ends a request waiting in the engine's queue at arrival + deadline",
          "[engine][limits]") {
  EngineConfig c;
  c.max_num_seqs = 1;
  c.max_queue_time = seconds_to_sim(2.0);
  const auto out =
      run_replica(c, {spec(0, 0.0), spec(1, 0.1, 0.5), spec(2, 0.2), spec(3, 0.3, 10.0)});
  REQUIRE(out.size() == 4);
  CHECK(out.at(0).outcome == Outcome::kCompleted);
  CHECK(out.at(0).at > seconds_to_sim(3.3));
  CHECK(out.at(1).outcome == Outcome::kTimedOut);
  CHECK(out.at(1).at == seconds_to_sim(0.1) + seconds_to_sim(0.5));
  CHECK(out.at(2).outcome == Outcome::kTimedOut);
  CHECK(out.at(2).at == seconds_to_sim(0.2) + seconds_to_sim(2.0));
  CHECK(out.at(3).outcome == Outcome::kCompleted);
}

// The same stream behind a max_inflight: 1 guard that queues: requests 1 and 2 wait in the guard
// queue. Request 1's deadline (0.5 s) is earlier than the guard's timeout_s (1 s): it leaves at
// 0.1 + 0.5 = 0.6 s. Request 2's deadline (3 s) is later: the guard's timeout wins, 0.2 + 1 = 1.2
// s.
TEST_CASE("in a guard queue the earlier of deadline and guard timeout wins", "[engine][limits]") {
  EngineConfig c;
  const auto out =
      run_replica(c, {spec(0, 0.0), spec(1, 0.1, 0.5), spec(2, 0.2, 3.0)},
                  "[{type: max_inflight, max_inflight: 1, on_fail: queue, timeout_s: 1}]");
  REQUIRE(out.size() == 3);
  CHECK(out.at(0).outcome == Outcome::kCompleted);
  CHECK(out.at(1).outcome == Outcome::kTimedOut);
  CHECK(out.at(1).at == seconds_to_sim(0.1) + seconds_to_sim(0.5));
  CHECK(out.at(2).outcome == Outcome::kTimedOut);
  CHECK(out.at(2).at == seconds_to_sim(0.2) + seconds_to_sim(1.0));
}

// A request scheduled once is never timed out: alone, request 0 (deadline 0.5 s) starts at 0 and
// runs its >= 3.3 s to completion.
TEST_CASE("a deadline stops at the first scheduling", "[engine][limits]") {
  EngineConfig c;
  const auto out = run_replica(c, {spec(0, 0.0, 0.5)});
  CHECK(out.at(0).outcome == Outcome::kCompleted);
}

// The pool's activation reserve was profiled for max_num_batched_tokens. With limits resolved
// (max_model_len set), a prefill chunk above the budget is a checked invariant failure; the
// resolved configuration can never produce one (max_num_batched_tokens >= max_model_len when
// unchunked), so this bypasses resolve_model_limits: a 3,000-token prompt, budget 2,048.
TEST_CASE("no prefill chunk exceeds the profiled max_num_batched_tokens", "[engine][limits]") {
  EngineConfig c;
  c.max_num_batched_tokens = 2048;
  c.max_model_len = 4096;
  RequestSpec s = spec(0, 0.0);
  s.prompt_tokens = 3000;
  s.output_tokens = 4;
  CHECK_THROWS_WITH(run_replica(c, {s}),
                    Catch::Matchers::Contains("prefill chunk of 3000 tokens exceeds "
                                              "max_num_batched_tokens 2048"));
}
