// The kinds of held-out run `kvsim-validate vllm-run` must take with the same command: another
// GPU (RTX 4090), tensor parallelism (Llama-3.1-8B at TP 2) and the MoE model with data and
// expert parallelism (Qwen3-30B-A3B, DP 2 + EP). Each is a small synthetic run folder in the
// shared run's layout, replayed with the profile `import llmservingsim` fitted from that
// configuration's perf/ bundle (tests/data/vllm-runs/profiles/, README there), checking that the
// replay completes and that the engine and KV pool follow meta.json as vLLM would: figures
// derived by hand in each case's comment.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "models/latency/profile.h"
#include "validate/vllm_run/vllm_run.h"

using namespace kvsim;
using namespace kvsim::validate;
using Catch::Matchers::Contains;

namespace heldout_kinds {
const std::filesystem::path kProfiles =
    std::filesystem::path(KVSIM_TEST_DATA) / "vllm-runs" / "profiles";

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Four requests with server stamps (seconds on the server's clock): prompts of 300-900 tokens,
// 4-16 output tokens, queued 0.1 s apart.
const char* const kRequests =
    R"({"request_id": "a", "input_toks": 300, "output_toks": 8, "queued_ts": 50.0, "first_token_ts": 50.05, "last_token_ts": 50.3}
{"request_id": "b", "input_toks": 900, "output_toks": 16, "queued_ts": 50.1, "first_token_ts": 50.2, "last_token_ts": 50.7}
{"request_id": "c", "input_toks": 500, "output_toks": 4, "queued_ts": 50.2, "first_token_ts": 50.3, "last_token_ts": 50.4}
{"request_id": "d", "input_toks": 700, "output_toks": 12, "queued_ts": 50.3, "first_token_ts": 50.4, "last_token_ts": 50.8}
)";

struct Replay {
  nlohmann::json summary, e2e;
  std::string scenario;
};

// Writes a run folder with `engine_kwargs`, replays it on `gpu` with `profile`, and returns
// kvsim's summary.json, e2e.json and the scenario it ran.
Replay replay(const nlohmann::json& engine_kwargs, const std::string& gpu,
              const std::filesystem::path& profile, const std::string& tag) {
  const auto base = std::filesystem::temp_directory_path() /
                    ("kvsim-heldout-" + tag + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base / "run");
  nlohmann::json meta = {{"schema_version", 1},
                         {"model", engine_kwargs["model"]},
                         {"vllm_version", "0.19.0"},
                         {"engine_kwargs", engine_kwargs}};
  std::ofstream(base / "run" / "meta.json") << meta.dump(2);
  std::ofstream(base / "run" / "requests.jsonl") << kRequests;
  VllmRunOptions o;
  o.run = base / "run";
  o.gpu = gpu;
  o.profile = profile;
  o.out_dir = base / "out";
  o.quiet = true;
  o.plot = false;
  const double worst = run_vllm_run(o);
  CHECK(std::isfinite(worst));
  Replay r{nlohmann::json::parse(slurp(base / "out" / "summary.json")),
           nlohmann::json::parse(slurp(base / "out" / "e2e.json")),
           slurp(base / "out" / "scenario.yaml")};
  std::filesystem::remove_all(base);
  CHECK(r.e2e["kvsim"]["requests_completed"] == 4);
  return r;
}

const nlohmann::json& layout(const Replay& r) { return r.summary["policies"][0]["gpu_layout"]; }
}  // namespace heldout_kinds

TEST_CASE("held out: another GPU, the RTX 4090 with Llama-3.1-8B, pool from vLLM's memory rule",
          "[vllm_run][heldout]") {
  // No num_gpu_blocks_override, no max_num_seqs or max_num_batched_tokens: vLLM's API-server
  // defaults for a GPU under 70 GiB are 256 sequences and 2,048 tokens (get_batch_defaults).
  nlohmann::json kw = {{"model", "meta-llama/Llama-3.1-8B"},
                       {"tensor_parallel_size", 1},
                       {"max_model_len", 8192},
                       {"dtype", "bfloat16"},
                       {"seed", 1}};
  const auto profile = heldout_kinds::kProfiles / "rtx4090-llama-3.1-8b-tp1.yaml";
  REQUIRE(load_profile(profile).gpu == "rtx-4090");
  const heldout_kinds::Replay r90 = heldout_kinds::replay(kw, "rtx-4090", profile, "4090-90");
  CHECK_THAT(r90.scenario,
             Contains("max_num_seqs: 256\n") && Contains("max_num_batched_tokens: 2048\n") &&
                 Contains("gpu_memory_utilization: 0.9\n") && Contains("tensor_parallel: 1\n"));
  // Llama-3.1-8B: 8,030,261,248 parameters (embedding and LM head 2 x 128,256 x 4,096 =
  // 1,050,673,152; 32 layers of 218,112,000; final norm 4,096) x 2 bytes; KV 32 layers x 2 x 8
  // heads x 128 x 2 bytes = 131,072 bytes a token.
  CHECK(heldout_kinds::layout(r90)["weights_bytes_per_gpu"] == 16'060'522'496);
  CHECK(heldout_kinds::layout(r90)["kv_bytes_per_token_per_gpu"] == 131'072);
  // The pool: 23.64 GiB x 0.9 = 22,844,931,047 bytes less the weights leaves 6,784,408,551 =
  // 51,761 tokens before the profile run's activations and the non-torch memory: fewer, whole
  // blocks of 16, and above zero.
  const int64_t pool90 = heldout_kinds::layout(r90)["kv_pool_tokens_per_gpu"].get<int64_t>();
  CHECK(pool90 % 16 == 0);
  CHECK(pool90 > 0);
  CHECK(pool90 < 51'761);
  // Lowering gpu_memory_utilization to 0.8 takes 0.1 x 23.64 GiB = 2,538,325,672 bytes =
  // 19,365.8 tokens from the pool, and nothing else (the weights and the activation peak are
  // the same): 1,210 or 1,211 blocks of 16 after the floors.
  kw["gpu_memory_utilization"] = 0.8;
  const heldout_kinds::Replay r80 = heldout_kinds::replay(kw, "rtx-4090", profile, "4090-80");
  const int64_t drop = pool90 - heldout_kinds::layout(r80)["kv_pool_tokens_per_gpu"].get<int64_t>();
  CHECK((drop == 1210 * 16 || drop == 1211 * 16));
}

TEST_CASE("held out: tensor parallelism, Llama-3.1-8B at TP 2 on the RTX PRO 6000",
          "[vllm_run][heldout]") {
  const nlohmann::json kw = {{"model", "meta-llama/Llama-3.1-8B"},
                             {"tensor_parallel_size", 2},
                             {"max_num_seqs", 8},
                             {"max_model_len", 4096},
                             {"dtype", "bfloat16"},
                             {"num_gpu_blocks_override", 2001},
                             {"seed", 1}};
  const auto profile = heldout_kinds::kProfiles / "rtxpro6000-llama-3.1-8b-tp2.yaml";
  const heldout_kinds::Replay r = heldout_kinds::replay(kw, "rtx-pro-6000", profile, "tp2");
  // max_num_batched_tokens unset on a GPU of 70 GiB or more (not an A100): 8,192.
  CHECK_THAT(r.scenario, Contains("tensor_parallel: 2\n") && Contains("max_num_seqs: 8\n") &&
                             Contains("max_num_batched_tokens: 8192\n"));
  // vLLM's TP sharding per GPU: Q, K, V, O and the MLP halved (a layer's 16,777,216 +
  // 8,388,608 + 16,777,216 + 176,160,768 = 218,103,808 / 2 = 109,051,904, plus its two norms,
  // 8,192, replicated); the vocabulary of the embedding and the LM head halved
  // (VocabParallelEmbedding, ParallelLMHead: 2 x 64,128 x 4,096 = 525,336,576); the final norm
  // 4,096. 32 x 109,060,096
  // + 525,336,576 + 4,096 = 4,015,263,744 parameters = 8,030,527,488 bytes. KV: 4 of the 8
  // heads a GPU, 32 x 2 x 4 x 128 x 2 = 65,536 bytes a token.
  CHECK(heldout_kinds::layout(r)["weights_bytes_per_gpu"] == 8'030'527'488);
  CHECK(heldout_kinds::layout(r)["kv_bytes_per_token_per_gpu"] == 65'536);
  // num_gpu_blocks_override 2,001 less vLLM's null block: 2,000 blocks of 16 = 32,000 tokens.
  CHECK(heldout_kinds::layout(r)["kv_pool_tokens_per_gpu"] == 32'000);
}

TEST_CASE(
    "held out: the MoE model with DP 2 and EP, costed with the fused-MoE term fitted from moe.csv",
    "[vllm_run][heldout][moe]") {
  const nlohmann::json kw = {{"model", "Qwen/Qwen3-30B-A3B-Instruct-2507"},
                             {"tensor_parallel_size", 1},
                             {"data_parallel_size", 2},
                             {"enable_expert_parallel", true},
                             {"max_num_seqs", 4},
                             {"max_num_batched_tokens", 1024},
                             {"max_model_len", 4096},
                             {"dtype", "bfloat16"},
                             {"num_gpu_blocks_override", 1001},
                             {"seed", 1}};
  const auto profile = heldout_kinds::kProfiles / "rtxpro6000-qwen3-30b-a3b-tp1.yaml";
  const Profile p = load_profile(profile);
  REQUIRE(p.routed_experts.fitted);
  const heldout_kinds::Replay r = heldout_kinds::replay(kw, "rtx-pro-6000", profile, "moe");
  // Two data-parallel ranks, each an engine with its own pool and its share of the experts:
  // 128 / 2 = 64 whole experts a GPU (32,073,216,000 weight bytes, derived in
  // vllm_run_test.cc's DP/EP case), KV 48 layers x 2 x 4 heads x 128 x 2 = 98,304 bytes a token;
  // each rank's pool is num_gpu_blocks_override 1,001 less the null block = 16,000 tokens.
  CHECK(r.summary["policies"][0]["replicas"].size() == 2);
  CHECK_THAT(r.scenario, Contains("engine: {data_parallel: 2, expert_parallel: true}") &&
                             Contains("max_num_seqs: 4\n") && Contains("num_blocks: 1000\n"));
  CHECK(heldout_kinds::layout(r)["weights_bytes_per_gpu"] == 32'073'216'000);
  CHECK(heldout_kinds::layout(r)["kv_bytes_per_token_per_gpu"] == 98'304);
  CHECK(heldout_kinds::layout(r)["kv_pool_tokens_per_gpu"] == 16'000);

  // The fitted term is what costs the routed experts: the same run with it removed from the
  // profile (the experts as GEMMs) decodes at another pace.
  const auto plain = std::filesystem::temp_directory_path() /
                     ("kvsim-heldout-plain-" + std::to_string(::getpid()) + ".yaml");
  Profile q = p;
  q.routed_experts = {};
  std::ofstream(plain) << write_profile_yaml(q);
  const heldout_kinds::Replay g = heldout_kinds::replay(kw, "rtx-pro-6000", plain, "moe-gemm");
  std::filesystem::remove(plain);
  auto tpot = [](const heldout_kinds::Replay& x) {
    for (const auto& m : x.e2e["metrics"]) {
      if (m["metric"] == "tpot_mean_s") return m["simulated"].get<double>();
    }
    return -1.0;
  };
  CHECK(tpot(r) > 0);
  CHECK(tpot(r) != Approx(tpot(g)).epsilon(1e-6));
}
