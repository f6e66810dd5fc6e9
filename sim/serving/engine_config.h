// The scenario's `engine:` section (everything but `kv:`, which the memory pool reads).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/sim_time.h"
#include "models/dtype.h"
#include "models/latency/collectives.h"
#include "models/latency/fixed_step_time.h"
#include "models/latency/profile.h"
#include "models/memory/activation.h"
#include "sim/serving/host_path.h"
#include "sim/serving/offload/kv_offloading_config.h"
#include "sim/serving/speculative_config.h"

namespace kvsim {

class ConfigNode;
struct ModelSpec;

struct EngineConfig {
  enum class Preemption { kRecompute, kSwap, kOff };
  enum class OnOom { kCrash, kAbortRequest };
  // The waiting queue's order and the preemption victim (sim/serving/run_queues.h).
  enum class SchedulingPolicy { kFcfs, kPriority, kShortestPromptFirst };

  std::string scheduler = "continuous";  // a name in scheduler_registry()
  int64_t max_num_seqs = 256;
  // Tokens per iteration. When the scenario gives none: 16384, or max_model_len when that is
  // larger and chunked prefill is off (resolve_model_limits; vLLM defaults it the same way).
  int64_t max_num_batched_tokens = 16384;
  // Longest prompt + output tokens a request may ask for; longer ones end at arrival as
  // rejected_too_long. 0 = no limit (until resolve_model_limits sets the model's max_position).
  int64_t max_model_len = 0;
  bool allow_long_max_model_len = false;  // max_model_len may exceed the model's max_position
  // How long a request may wait before its first scheduling (guard queue and engine waiting
  // queue together) before it ends as timed_out; a trace's per-request value overrides it.
  // nullopt = forever.
  std::optional<SimTime> max_queue_time;
  bool chunked_prefill = false;
  // vLLM V1's SchedulerConfig.scheduler_reserve_full_isl (default on at the pinned commit,
  // docs/vllm-conformance.md): admit a waiting request only when its whole sequence fits the
  // free blocks (BatchLimits::reserve_full_sequence).
  bool scheduler_reserve_full_isl = true;
  // vLLM's async scheduling (AsyncScheduler; on by default in vLLM, which resolves the unset
  // option to on: docs/vllm-conformance.md, "Async scheduling"): step N+1 is planned while step N
  // runs, so N's finished requests free their blocks one plan later and an arrival joins one step
  // later. Only the continuous scheduler has it; the parser turns it off for the others.
  bool async_scheduling = true;
  // vLLM's long_prefill_token_threshold (0: none): at most this many prefill tokens per request
  // and step (BatchLimits::long_prefill_token_threshold). Needs chunked_prefill.
  int64_t long_prefill_token_threshold = 0;
  int64_t batch_size = 8;  // static scheduler: requests per fixed batch
  SchedulingPolicy scheduling_policy = SchedulingPolicy::kFcfs;
  Preemption preemption = Preemption::kRecompute;  // paged stores only
  int64_t swap_space_bytes = 4 * (int64_t{1} << 30);
  OnOom on_oom = OnOom::kCrash;
  SimTime restart = 90 * kNsPerSecond;
  AttentionKind attention = AttentionKind::kFlash;
  int tensor_parallel = 1;
  // Parallelism and quantization (vLLM engine args --pipeline-parallel-size, --quantization,
  // --kv-cache-dtype); unset dtypes keep the catalog model's. See docs/memory.md.
  int pipeline_parallel = 1;
  // Data and expert parallelism (vLLM --data-parallel-size, --enable-expert-parallel): this
  // replica is one of `data_parallel` ranks whose MoE layers share their experts, the others
  // taken to carry the same load (docs/models.md "Expert parallelism").
  int data_parallel = 1;
  bool expert_parallel = false;
  std::optional<DType> weights_dtype;
  std::optional<DType> kv_cache_dtype;
  int64_t workspace_bytes = 512 * (int64_t{1} << 20);
  std::string profile_path;  // calibrated latency profile; empty = the GPU's defaults
  // Flash prefill kernel generation for the built-in profile (`attention_kernel: auto|fa2|fa3`);
  // unset ("auto") = vLLM's choice for the GPU (FA3 on Hopper, FA2 elsewhere). docs/latency.md.
  std::optional<FlashKernel> attention_kernel;
  // A declared step time (`step_time: {fixed_s, per_token_s, per_seq_s}`) in place of the
  // latency model's seconds (models/latency/fixed_step_time.h); unset: the latency model.
  std::optional<FixedStepTime> step_time;
  // Decode-only stretches advance in closed form, several iterations per event (Replica's
  // fast-forward, docs/architecture.md); false steps one iteration per event. Outputs are
  // byte-identical either way: a switch for checking and benchmarking, not a model choice.
  bool fast_forward = true;
  // Speculative decoding (`speculative_config:`, vLLM's --speculative-config; sim/serving/
  // speculative.h, docs/models.md "Speculative decoding"); nullopt: none. Only the continuous
  // scheduler; the fast-forward is off with it.
  std::optional<SpeculativeConfig> speculative;
  // KV offloading to CPU memory (`kv_offloading:`, vLLM's --kv-offloading-backend and
  // --kv-offloading-size; sim/serving/offload/, docs/memory.md "The memory hierarchy"); nullopt:
  // none. It turns the fast-forward off (loads end at their own events).
  std::optional<KvOffloadingConfig> kv_offloading;
  // How collectives run (models/latency/collectives.h, docs/latency.md "Collectives"): GPU
  // peer-to-peer (`p2p: auto|on|off`; auto: the catalog GPU's `p2p`), vLLM's
  // --disable-custom-all-reduce and --enforce-eager (here: every all-reduce timed eager).
  P2pSetting p2p = P2pSetting::kAuto;
  bool disable_custom_all_reduce = false;
  bool enforce_eager = false;
  // vLLM's --limit-mm-per-prompt '{"image": 0}' (`limit_mm_per_prompt: {image: 0}`): a
  // multimodal checkpoint serves text only, and vLLM builds no vision tower
  // (ModelSpec::vision_params not loaded). Unset: images allowed, the tower loaded.
  bool images_off = false;
  // The vLLM version being modelled (`vllm_version`, sim/serving/host_path.h): where output
  // processing runs and when a token becomes visible. nullopt: V1's, as vLLM runs today. A V0
  // version turns async scheduling off (V0 has no AsyncScheduler) and needs the continuous or
  // vllm_v0 scheduler, no speculation and pipeline_parallel 1 (vLLM turns async output
  // processing off with pipeline parallelism and speculative decoding).
  std::optional<VllmVersion> vllm_version;
  HostPath host_path = HostPath::kV1FrontEnd;
};

// The latency model's collective settings for this engine: its switches, and vLLM's default CUDA
// graph capture size from max_num_seqs, max_num_batched_tokens and the speculative tokens.
CollectiveSettings collective_settings(const EngineConfig& c);

// Reads `engine:` (may be absent: all defaults). `kv:` is left for the memory pool. Throws
// ConfigError.
EngineConfig parse_engine_config(const ConfigNode& engine);

// The settings that need the model, as vLLM checks them: max_model_len defaults to the model's
// max_position and may exceed it only with allow_long_max_model_len; with chunked prefill off,
// max_num_batched_tokens must be at least max_model_len (defaulted to max(max_model_len, 16384)
// when not given). Throws ConfigError at the offending key. `engine` is the node `c` was parsed
// from.
void resolve_model_limits(EngineConfig& c, const ConfigNode& engine, const ModelSpec& model);

}  // namespace kvsim
