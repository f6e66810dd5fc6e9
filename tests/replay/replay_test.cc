// `kvsim-validate replay` with fake clocks (ReplayOptions::clock_override): the engine is kvsim's
// own (a clock returning the modeled time reproduces `kvsim run` byte for byte), the ClockBatch
// sequence and the times of a one-request run derived by hand, and the release calls under
// preemption (recompute and swap).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/latency/profile.h"
#include "sim/config/scenario.h"
#include "sim/run/scenario_runner.h"
#include "validate/replay/replay.h"

using namespace kvsim;
using namespace kvsim::validate;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / fmt::format("kvsim-replay-{}-{}", name, ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream b;
  b << in.rdbuf();
  return b.str();
}

fs::path write_scenario(const fs::path& dir, const std::string& yaml) {
  const fs::path p = dir / "scenario.yaml";
  std::ofstream(p) << yaml;
  return p;
}

// The marks a replay adds to summary.json and manifest.json (RunOptions::marks).
const char* const kMarks[] = {"clock", "backend", "device", "repeats", "threads", "forward_seed"};

std::string json_without_marks(const fs::path& p) {
  auto j = nlohmann::ordered_json::parse(slurp(p));
  for (const char* k : kMarks) j.erase(k);
  return j.dump(2);
}

// The modeled clock: what the latency model said, so the engine's times are those of `kvsim run`.
class ModeledClock : public IterationClock {
 public:
  double seconds(const ClockBatch& b) override { return b.modeled->seconds; }
};

// A clock maker (ReplayOptions::clock_override) giving every replica the modeled clock.
std::unique_ptr<IterationClock> modeled_clock(const ForwardSetup&) {
  return std::make_unique<ModeledClock>();
}

// Records every batch and release, in order; times: 1 ms for an iteration with a prefill chunk,
// 0.5 ms for a decode-only one (or the modeled time).
struct Event {
  bool release = false;  // else a sequence of a batch
  bool release_all = false;
  ClockSeq seq;
  bool decode = false;
  double start_s = 0;
};

class RecordingFakeClock : public IterationClock {
 public:
  RecordingFakeClock(std::vector<Event>& log, bool modeled) : log_(log), modeled_(modeled) {}
  double seconds(const ClockBatch& b) override {
    for (const ClockSeq& s : b.prefill)
      log_.push_back({.seq = s, .decode = false, .start_s = b.start_s});
    for (const ClockSeq& s : b.decode)
      log_.push_back({.seq = s, .decode = true, .start_s = b.start_s});
    if (modeled_) return b.modeled->seconds;
    return b.prefill.empty() ? 0.0005 : 0.001;
  }
  void release(int64_t id) override {
    log_.push_back({.release = true, .seq = {.request_id = id}});
  }
  void release_all() override { log_.push_back({.release = true, .release_all = true}); }

 private:
  std::vector<Event>& log_;
  bool modeled_;
};

// A plain run (`kvsim run`) of the scenario file, its result files in `out`: what a replay on the
// modeled clock must reproduce.
RunResult run_plain(const fs::path& scenario, const fs::path& out) {
  RunOptions plain;
  plain.out_dir = out.string();
  return run_scenario(load_scenario_file(scenario, Catalog::builtin()), plain);
}

// A replay of the scenario file into `out`, quiet, on the clocks `make_clock` makes (one per
// replica, in build order) instead of a backend's.
ReplayOptions quiet_replay(const fs::path& scenario, const fs::path& out,
                           decltype(ReplayOptions::clock_override) make_clock) {
  ReplayOptions o;
  o.scenario = scenario;
  o.out_dir = out;
  o.quiet = true;
  o.clock_override = std::move(make_clock);
  return o;
}

struct Cli {
  int exit_code = -1;
  std::string err;
};

Cli run_validate(const std::string& args) {
  const fs::path dir = fresh_dir("cli");
  const std::string cmd = fmt::format("'{}' {} >'{}' 2>'{}' </dev/null", KVSIM_VALIDATE_BIN, args,
                                      (dir / "out").string(), (dir / "err").string());
  const int status = std::system(cmd.c_str());
  Cli r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "err")};
  fs::remove_all(dir);
  return r;
}

// scenarios/replay-cpu-tiny.yaml's model, device and pools, loaded harder (8 requests/s, where
// the modeled tight pool preempts), with two more policies: one that preempts by swap and one with
// chunked prefill. Every path a clock sees.
std::string variants_scenario() {
  return R"(
name: variants
seed: 21
model: llama-tiny
gpu: cpu-host
engine:
  scheduler: continuous
  max_num_seqs: 32
  max_num_batched_tokens: 2048
  max_model_len: 1024
  workspace_gb: 0.25
workload:
  arrivals: {type: poisson, rate: 8}
  prompt_tokens: {type: lognormal, median: 160, sigma: 0.7, min: 32, max: 512}
  output_tokens: {type: lognormal, median: 48, sigma: 0.6, min: 16, max: 128}
  max_requests: 200
policies:
  - name: paged
    engine: {kv: {type: paged, block_size: 16, num_blocks: 512}}
    guards: []
  - name: paged-tight
    engine: {kv: {type: paged, block_size: 16, num_blocks: 192}}
    guards: []
  # Swap is V0's preemption, V0's synchronous loop with it (under async scheduling a request
  # swapped in may be preempted again before it runs, a second release without a use).
  - name: paged-swap
    engine: {kv: {type: paged, block_size: 16, num_blocks: 192}, preemption: swap, swap_space_gb: 0.01,
             async_scheduling: false}
    guards: []
  - name: chunked
    engine: {kv: {type: paged, block_size: 16, num_blocks: 192}, chunked_prefill: true, max_num_batched_tokens: 256}
    guards: []
)";
}

}  // namespace

TEST_CASE("a replay whose clock returns the modeled time writes kvsim run's result files",
          "[replay]") {
  // The replay is kvsim's engine, not a second scheduler: with the latency model's own seconds
  // as the "measured" time, every result file is byte-identical to a plain run's (which also
  // fast-forwards decode stretches: the replay never does, so this checks that too), on
  // variants_scenario() and on scenarios/replay-cpu-tiny.yaml as shipped. summary.json
  // differs only by the replay's marks (clock, backend, device, repeats, threads, forward_seed),
  // removed before comparing; summary.csv, requests.csv and timeseries.csv carry no marks.
  const fs::path dir = fresh_dir("identity");
  const fs::path scenario = write_scenario(dir, variants_scenario());
  const fs::path shipped = fs::path(KVSIM_SOURCE_DIR) / "scenarios" / "replay-cpu-tiny.yaml";

  const RunResult r = run_plain(scenario, dir / "plain");
  REQUIRE(r.policies.size() == 4);
  REQUIRE(r.policies[1].preemptions > 0);  // the tight pool preempts by recompute
  REQUIRE(r.policies[2].preemptions > 0);  // and by swap

  run_replay(quiet_replay(scenario, dir / "replay", modeled_clock));

  for (const char* f : {"summary.csv", "requests.csv", "timeseries.csv"}) {
    INFO(f);
    CHECK(slurp(dir / "plain" / f) == slurp(dir / "replay" / f));
  }
  CHECK(json_without_marks(dir / "plain" / "summary.json") ==
        json_without_marks(dir / "replay" / "summary.json"));
  const auto summary = nlohmann::json::parse(slurp(dir / "replay" / "summary.json"));
  CHECK(summary["clock"] == "measured");
  CHECK(summary["backend"] == "cpu");
  const auto manifest = nlohmann::json::parse(slurp(dir / "replay" / "manifest.json"));
  CHECK(manifest["clock"] == "measured");
  CHECK(manifest["files"].back() == "iterations.csv");

  // iterations.csv: one row per iteration; with this clock measured_s == modeled_s on every row.
  std::istringstream rows(slurp(dir / "replay" / "iterations.csv"));
  std::string line;
  std::getline(rows, line);
  CHECK(line + "\n" == kIterationsHeader);
  int64_t n = 0;
  while (std::getline(rows, line)) {
    const auto last = line.rfind(',');
    const auto before = line.rfind(',', last - 1);
    CHECK(line.substr(before + 1, last - before - 1) == line.substr(last + 1));
    ++n;
  }
  CHECK(n > 0);

  // The shipped scenario as it is, the same way.
  run_plain(shipped, dir / "shipped-plain");
  run_replay(quiet_replay(shipped, dir / "shipped-replay", modeled_clock));
  for (const char* f : {"summary.csv", "requests.csv", "timeseries.csv"}) {
    INFO(f);
    CHECK(slurp(dir / "shipped-plain" / f) == slurp(dir / "shipped-replay" / f));
  }
  CHECK(json_without_marks(dir / "shipped-plain" / "summary.json") ==
        json_without_marks(dir / "shipped-replay" / "summary.json"));
  fs::remove_all(dir);
}

TEST_CASE("a cluster's replicas each get their own clock", "[replay]") {
  // Two replicas behind round robin, 20 requests at 10/s: with the modeled clock the files are a
  // plain run's (summary.json but for the marks), two clocks are made (one per replica, with the
  // same ForwardSetup: the same group), and iterations.csv has rows of replica 0 and replica 1,
  // each replica's `index` counting 0, 1, 2, ... and its start_s never going back.
  const fs::path dir = fresh_dir("cluster");
  const fs::path scenario = write_scenario(dir, R"(
name: two
seed: 5
model: llama-tiny
gpu: cpu-host
engine: {max_model_len: 1024, kv: {type: paged, block_size: 16, num_blocks: 128}}
cluster:
  replicas: [{name: r, count: 2}]
  router: {type: round_robin}
workload:
  arrivals: {type: fixed, rate: 10}
  prompt_tokens: {type: uniform, min: 32, max: 256}
  output_tokens: {type: uniform, min: 8, max: 32}
  max_requests: 20
policies: [{name: rr, guards: []}]
)");
  run_plain(scenario, dir / "plain");
  int clocks = 0;
  run_replay(quiet_replay(scenario, dir / "replay", [&](const ForwardSetup& f) {
    ++clocks;
    CHECK(f.num_blocks == 128);
    return std::make_unique<ModeledClock>();
  }));
  CHECK(clocks == 2);
  for (const char* f : {"summary.csv", "requests.csv", "timeseries.csv"}) {
    INFO(f);
    CHECK(slurp(dir / "plain" / f) == slurp(dir / "replay" / f));
  }
  CHECK(json_without_marks(dir / "plain" / "summary.json") ==
        json_without_marks(dir / "replay" / "summary.json"));
  std::istringstream rows(slurp(dir / "replay" / "iterations.csv"));
  std::string line;
  std::getline(rows, line);
  int64_t next[2] = {0, 0};
  double last[2] = {0, 0};
  while (std::getline(rows, line)) {
    std::vector<std::string> f;
    std::istringstream cells(line);
    for (std::string c; std::getline(cells, c, ',');) f.push_back(c);
    REQUIRE(f.size() == 10);
    CHECK(f[0] == "rr");
    const int r = std::stoi(f[1]);
    REQUIRE((r == 0 || r == 1));
    CHECK(std::stoll(f[2]) == next[r]++);
    CHECK(std::stod(f[3]) >= last[r]);
    last[r] = std::stod(f[3]);
  }
  CHECK(next[0] > 0);
  CHECK(next[1] > 0);
  fs::remove_all(dir);
}

TEST_CASE("one request on a fixed-time clock: the ClockBatch sequence and its times by hand",
          "[replay]") {
  // One request, prompt P = 100, output N = 4, arriving at t = 1 s (fixed arrivals at rate 1:
  // the k-th at k/rate). The clock takes 1 ms for an iteration with a prefill chunk, 0.5 ms for a
  // decode-only one.
  //   iteration 0 at 1.000 s: prefill {id 0, kv_before 0, new 100, emits}; first token at 1.001
  //   iteration 1 at 1.001 s: decode {0, kv_before 100, new 1}: the KV holds the prompt, not yet
  //     the first generated token (this step computes it); context_tokens() = 100 + 1 = 101
  //   iteration 2 at 1.0015 s: decode {0, 101, 1}; iteration 3 at 1.002 s: decode {0, 102, 1}:
  //     kv_before = P + i - 1 for decode i = 1..N-1; the 4th token ends it at 1.0025 s.
  // TTFT = 0.001 s, E2E = 0.001 + 3 x 0.0005 = 0.0025 s, TPOT = (E2E - TTFT) / 3 = 0.0005 s;
  // prefill_s 0.001, decode_s 0.0015. The request is released once, when it finishes.
  const fs::path dir = fresh_dir("one");
  const fs::path scenario = write_scenario(dir, R"(
name: one
seed: 1
model: llama-tiny
gpu: cpu-host
engine: {max_model_len: 1024, kv: {type: paged, block_size: 16, num_blocks: 64}}
workload:
  arrivals: {type: fixed, rate: 1}
  prompt_tokens: {type: fixed, value: 100}
  output_tokens: {type: fixed, value: 4}
  max_requests: 1
policies: [{name: one, guards: []}]
)");
  std::vector<Event> log;
  ForwardSetup seen;
  ReplayOptions o = quiet_replay(scenario, dir / "out", [&](const ForwardSetup& f) {
    seen = f;
    return std::make_unique<RecordingFakeClock>(log, false);
  });
  o.repeats = 3;
  o.threads = 2;
  o.seed = 9;
  run_replay(o);

  // The forward pass the clock would be built from: the pool's model and blocks, the options.
  CHECK(seen.model.name == "llama-tiny");
  CHECK(seen.block_tokens == 16);
  CHECK(seen.num_blocks == 64);
  CHECK(seen.repeats == 3);
  CHECK(seen.threads == 2);
  CHECK(seen.seed == 9);

  REQUIRE(log.size() == 5);
  auto same = [](const ClockSeq& a, int64_t kv_before, int64_t new_tokens) {
    return a.request_id == 0 && a.kv_before == kv_before && a.new_tokens == new_tokens &&
           a.emits_token;
  };
  CHECK((!log[0].decode && same(log[0].seq, 0, 100)));
  CHECK(log[0].start_s == 1.0);
  for (int i = 1; i <= 3; ++i) {
    INFO("decode " << i);
    CHECK((log[i].decode && same(log[i].seq, 100 + i - 1, 1)));
  }
  CHECK((log[4].release && !log[4].release_all && log[4].seq.request_id == 0));

  std::istringstream req(slurp(dir / "out" / "requests.csv"));
  std::string header, row;
  std::getline(req, header);
  std::getline(req, row);
  CHECK(row ==
        "one,0,1.000000,100,100,4,4,completed,0.001000,0.000500,0.002500,0,0,"
        "0.000000000,0.000000000,0.001000000,0.001500000,0.000000000");

  // iterations.csv, but for modeled_s (the latency model's figure): start_s, the prefill and
  // decode counts, the decode context (context_tokens(): 101, 102, 103) and the measured time.
  std::istringstream it(slurp(dir / "out" / "iterations.csv"));
  std::vector<std::string> lines;
  for (std::string l; std::getline(it, l);)
    lines.push_back(l.substr(0, l.rfind(',', l.rfind(',') - 1)) + l.substr(l.rfind(',')));
  const std::vector<std::string> expected = {
      "policy,replica,index,start_s,prefill_seqs,prefill_tokens,decode_seqs,decode_context_tokens,"
      "measured_s",
      "one,0,0,1.000000000,1,100,0,0,0.001", "one,0,1,1.001000000,0,0,1,101,0.0005",
      "one,0,2,1.001500000,0,0,1,102,0.0005", "one,0,3,1.002000000,0,0,1,103,0.0005"};
  CHECK(lines == expected);
  fs::remove_all(dir);
}

TEST_CASE("release calls under preemption: once per drop, never twice without a use between",
          "[replay]") {
  // Each policy's clock log is checked for:
  //  (a) every release names a request that was in a batch since its previous release (none
  //      released twice without being used in between, none released before it ran);
  //  (b) while a request holds KV its batches follow on: kv_before = the previous kv_before +
  //      new_tokens; after a release it comes back with kv_before 0 (recompute) or, swapped in,
  //      with what it held (> 0);
  //  (c) at the end nothing is held: each of the 200 requests was released after its last batch;
  //  (d) releases = 200 finishes + the policy's preemptions (each preemption drops the victim's
  //      KV once; no OOM here, so every request finishes while running and is released once).
  const fs::path dir = fresh_dir("release");
  const fs::path scenario = write_scenario(dir, variants_scenario());
  std::vector<std::vector<Event>> logs;
  logs.reserve(8);
  run_replay(quiet_replay(scenario, dir / "out", [&](const ForwardSetup&) {
    logs.emplace_back();
    return std::make_unique<RecordingFakeClock>(logs.back(), true);
  }));
  const auto summary = nlohmann::json::parse(slurp(dir / "out" / "summary.json"));
  REQUIRE(logs.size() == 4);
  for (size_t p = 0; p < logs.size(); ++p) {
    const auto& policy = summary["policies"][p];
    INFO("policy " << policy["name"].get<std::string>());
    std::map<int64_t, ClockSeq> held;  // in a batch since its last release: its last ClockSeq
    std::set<int64_t> ran;
    std::set<int64_t> released, released_twice;  // released with no batch since; twice so
    int64_t releases = 0, swapped_back = 0;
    bool ok_a = true, ok_b = true;
    for (const Event& e : logs[p]) {
      const int64_t id = e.seq.request_id;
      if (e.release) {
        REQUIRE(!e.release_all);
        ++releases;
        if (held.erase(id) == 0) {
          // Under swap a request swapped back in can be chosen as the victim again in the same
          // plan, before it runs: the KV it re-loaded is dropped again, a second release with no
          // batch between. Allowed only after a release under swap and only when the request
          // then comes back swapped (checked at its next batch).
          if (released.count(id) == 0 || policy["name"] != "paged-swap") ok_a = false;
          released_twice.insert(id);
        }
        released.insert(id);
        continue;
      }
      ran.insert(id);
      released.erase(id);
      if (released_twice.erase(id) > 0 && e.seq.kv_before == 0) ok_a = false;
      if (auto h = held.find(id); h != held.end()) {
        if (e.seq.kv_before != h->second.kv_before + h->second.new_tokens) ok_b = false;
      } else if (e.seq.kv_before > 0) {
        ++swapped_back;
      }
      held[id] = e.seq;
    }
    CHECK(ok_a);
    CHECK(ok_b);
    CHECK(held.empty());
    CHECK(ran.size() == 200);
    CHECK(releases == 200 + policy["preemptions"].get<int64_t>());
    if (policy["name"] == "paged-swap") CHECK(swapped_back > 0);
    if (policy["name"] != "paged-swap") CHECK(swapped_back == 0);
  }
  fs::remove_all(dir);
}

TEST_CASE("replay's profile option replaces every policy's engine.profile", "[replay]") {
  // Three policies: one without an engine of its own, one with its own engine.profile (which
  // --profile must override too), one with other engine keys. The replay with --profile P and
  // the modeled clock must write what a plain run writes with every policy's engine.profile = P
  // (the scenario's engine and each policy's, set through --set), and differ from the replay
  // without it (P is the H100's built-in profile, fa3 efficiencies; cpu-host's built-in profile
  // is the A100's, as for every GPU without its own).
  const fs::path dir = fresh_dir("profile");
  const fs::path h100 = dir / "h100.yaml";
  const fs::path cpu = dir / "cpu.yaml";
  std::ofstream(h100) << write_profile_yaml(default_profile(Catalog::builtin().gpu("h100-sxm")));
  std::ofstream(cpu) << write_profile_yaml(default_profile(Catalog::builtin().gpu("cpu-host")));
  const fs::path scenario = write_scenario(dir, fmt::format(R"(
name: profiles
seed: 3
model: llama-tiny
gpu: cpu-host
engine: {{max_model_len: 1024, kv: {{type: paged, block_size: 16, num_blocks: 256}}}}
workload:
  arrivals: {{type: poisson, rate: 8}}
  prompt_tokens: {{type: uniform, min: 32, max: 512}}
  output_tokens: {{type: uniform, min: 16, max: 64}}
  max_requests: 30
policies:
  - {{name: plain, guards: []}}
  - {{name: own-profile, engine: {{profile: {}}}, guards: []}}
  - {{name: own-engine, engine: {{max_num_seqs: 8}}, guards: []}}
)",
                                                            cpu.string()));
  auto replay = [&](const fs::path& out, const fs::path& profile) {
    ReplayOptions o = quiet_replay(scenario, out, modeled_clock);
    o.profile = profile;
    run_replay(o);
  };
  replay(dir / "with", h100);
  replay(dir / "without", "");
  const std::string p = fs::absolute(h100).string();
  const Scenario s =
      load_scenario_with_sets(ConfigNode::parse_file(scenario),
                              {"engine.profile=" + p, "policies.0.engine.profile=" + p,
                               "policies.1.engine.profile=" + p, "policies.2.engine.profile=" + p},
                              Catalog::builtin());
  RunOptions plain;
  plain.out_dir = (dir / "plain").string();
  run_scenario(s, plain);
  CHECK(slurp(dir / "with" / "requests.csv") == slurp(dir / "plain" / "requests.csv"));
  CHECK(slurp(dir / "with" / "requests.csv") != slurp(dir / "without" / "requests.csv"));
  fs::remove_all(dir);
}

TEST_CASE("disaggregated replicas: the prefill side releases at the transfer's end", "[replay]") {
  // One prefill and one decode replica, 40 requests (outputs >= 2, so every one transfers), the
  // modeled clock with a log per replica (made in build order: prefill, then decode):
  //  - the result files are a plain run's (the hand-off and transfer paths without fast-forward);
  //  - prefill side: each request runs prefill chunks only, then is released once, when its KV
  //    leaves with the transfer (Replica::release_handed_off): 40 releases, nothing held at the
  //    end;
  //  - decode side: each request first appears as a decode step whose KV holds the transferred
  //    prompt (kv_before = prompt tokens > 0: the clock fills it untimed), continues by one token
  //    a step, and is released once when it finishes: 40 releases, nothing held.
  const fs::path dir = fresh_dir("disagg");
  const fs::path scenario = write_scenario(dir, R"(
name: pd
seed: 4
model: llama-tiny
gpu: cpu-host
engine: {max_model_len: 1024, kv: {type: paged, block_size: 16, num_blocks: 256}}
cluster:
  replicas:
    - {name: p, count: 1, role: prefill}
    - {name: d, count: 1, role: decode}
  kv_transfer: {gb_per_s: 10, latency_us: 50}
workload:
  arrivals: {type: poisson, rate: 20}
  prompt_tokens: {type: uniform, min: 32, max: 256}
  output_tokens: {type: uniform, min: 2, max: 32}
  max_requests: 40
policies: [{name: pd, guards: []}]
)");
  run_plain(scenario, dir / "plain");
  std::vector<std::vector<Event>> logs;
  logs.reserve(4);
  run_replay(quiet_replay(scenario, dir / "replay", [&](const ForwardSetup&) {
    logs.emplace_back();
    return std::make_unique<RecordingFakeClock>(logs.back(), true);
  }));
  for (const char* f : {"summary.csv", "requests.csv", "timeseries.csv"}) {
    INFO(f);
    CHECK(slurp(dir / "plain" / f) == slurp(dir / "replay" / f));
  }
  REQUIRE(logs.size() == 2);
  for (int side = 0; side < 2; ++side) {
    INFO((side == 0 ? "prefill side" : "decode side"));
    std::map<int64_t, ClockSeq> held;
    std::set<int64_t> released;
    bool ok = true;
    for (const Event& e : logs[side]) {
      const int64_t id = e.seq.request_id;
      if (e.release) {
        if (held.erase(id) == 0 || !released.insert(id).second) ok = false;  // once, after use
        continue;
      }
      if (side == 0 && e.decode) ok = false;  // the prefill side never decodes
      if (auto h = held.find(id); h != held.end()) {
        if (e.seq.kv_before != h->second.kv_before + h->second.new_tokens) ok = false;
      } else if (side == 1 && !(e.decode && e.seq.kv_before > 0)) {
        ok = false;  // arrives on the decode side with the prompt's KV
      }
      held[id] = e.seq;
    }
    CHECK(ok);
    CHECK(held.empty());
    CHECK(released.size() == 40);
  }
  fs::remove_all(dir);
}

TEST_CASE("kvsim-validate replay: bad input is one line and exit 2", "[replay]") {
  const fs::path scenario = fs::path(KVSIM_SOURCE_DIR) / "scenarios" / "replay-cpu-tiny.yaml";
  const fs::path out = fresh_dir("bad") / "out";
  const Cli repeats = run_validate(fmt::format("replay '{}' --backend cpu --repeats 0 -o '{}'",
                                               scenario.string(), out.string()));
  CHECK(repeats.exit_code == 2);
  CHECK(repeats.err.find("--repeats") != std::string::npos);
  const Cli backend = run_validate(
      fmt::format("replay '{}' --backend tpu -o '{}'", scenario.string(), out.string()));
  CHECK(backend.exit_code == 2);
  CHECK(backend.err.find("--backend") != std::string::npos);
  // A bad scenario key: the file:line:col of the loader, through the same path as `kvsim run`.
  const fs::path dir = fresh_dir("badkey");
  const fs::path bad = write_scenario(dir, "name: x\nseed: 1\nmodle: llama-tiny\n");
  const Cli key = run_validate(fmt::format("replay '{}' -o '{}'", bad.string(), out.string()));
  CHECK(key.exit_code == 2);
  CHECK(key.err.find("scenario.yaml:3:1") != std::string::npos);
  CHECK(std::count(key.err.begin(), key.err.end(), '\n') <= 1);
  CHECK_THROWS_AS(run_replay(ReplayOptions{.scenario = bad, .backend = "tpu", .out_dir = out}),
                  InputError);
  fs::remove_all(dir);
}
