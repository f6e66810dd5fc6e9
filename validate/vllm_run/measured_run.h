// A measured vLLM serving run, as `kvsim-validate vllm-run` compares kvsim with it: the engine's
// arguments and every request's lengths, arrival and server-side latencies. Two layouts are read:
//   - a run folder: meta.json (`engine_kwargs`: vLLM's engine arguments) and requests.jsonl (one
//     request a line: input_toks, output_toks and the server's own monotonic timestamps
//     queued_ts, scheduled_ts, first_token_ts, last_token_ts), optionally timeseries.csv (the
//     server's running/waiting counts once a second) - the layout of
//     ../shared/reference/measured/llmservingsim/vllm-runs/;
//   - a `vllm bench serve --save-result --save-detailed` JSON file (vllm/benchmarks/serve.py:
//     per request input_lens, output_lens, ttfts, itls and start_times, in seconds), with the
//     engine's arguments from a meta.json beside it when there is one (else vLLM's defaults).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kvsim::validate {

// vLLM's engine arguments that decide the run (vllm/engine/arg_utils.py, EngineArgs); unset
// optionals take vLLM's defaults where the replay resolves them (vllm_engine.h).
struct VllmEngineArgs {
  std::string model;             // Hugging Face name ("meta-llama/Llama-3.1-8B")
  std::string vllm_version;      // "" when not recorded
  int tensor_parallel = 1;       // tensor_parallel_size
  int data_parallel = 1;         // data_parallel_size
  bool expert_parallel = false;  // enable_expert_parallel
  std::optional<int64_t> max_num_seqs;
  std::optional<int64_t> max_num_batched_tokens;
  std::optional<int64_t> max_model_len;
  std::optional<int64_t> num_gpu_blocks;  // num_gpu_blocks_override (or num_gpu_blocks)
  int block_size = 16;                    // vLLM's CUDA default (CacheConfig.block_size)
  double gpu_memory_utilization = 0.9;    // vLLM's default
  bool enable_prefix_caching = true;      // on by default in the V1 engine
  std::string dtype = "auto";             // auto | bfloat16 | float16 | half | float32
  std::string kv_cache_dtype = "auto";    // auto | fp8 | fp8_e4m3 | fp8_e5m2 | bfloat16 ...
  uint64_t seed = 0;
  std::optional<bool> async_scheduling;  // unset: vLLM resolves it (on, or by the drafter)
  std::optional<int64_t> long_prefill_token_threshold;
  bool enforce_eager = false;              // --enforce-eager
  bool disable_custom_all_reduce = false;  // --disable-custom-all-reduce
  // vLLM's speculative_config as the scenario's engine speculative_config (a JSON flow map,
  // engine_kwargs.cc); "" when the run did not speculate.
  std::string speculative_config;
};

// One request as the server saw it, in seconds. arrival_s is relative to the run's first
// arrival; tpot_s is absent for a single-token output.
struct MeasuredRequest {
  std::string id;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double arrival_s = 0;
  double ttft_s = 0;
  double e2e_s = 0;
  std::optional<double> tpot_s;
};

struct MeasuredRun {
  std::string format;            // "vllm-run" or "vllm-bench-serve"
  std::filesystem::path source;  // the folder or the JSON file
  VllmEngineArgs engine;
  bool engine_from_meta = false;          // engine arguments read from a meta.json
  std::vector<MeasuredRequest> requests;  // in arrival order (ties: the file's order)
  int64_t skipped_failed = 0;             // bench serve: requests that ended in an error (left out)
  std::optional<std::filesystem::path> timeseries;  // the server's timeseries.csv, if present
};

// Reads a run folder or a bench-serve JSON file. Throws InputError (one line: file, and
// line:col or line, and what is wrong) on anything unreadable, missing or inconsistent.
MeasuredRun read_measured_run(const std::filesystem::path& path);

// Reads meta.json's engine arguments (`engine_kwargs`, or the top level when it has none).
VllmEngineArgs read_vllm_meta(const std::filesystem::path& meta_json);

}  // namespace kvsim::validate
