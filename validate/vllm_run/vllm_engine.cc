#include "validate/vllm_run/vllm_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/errors.h"
#include "core/units.h"
#include "models/catalog.h"

namespace kvsim::validate {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A YAML double-quoted scalar.
std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

// vLLM's --dtype as kvsim's weights_dtype: "auto" keeps the checkpoint's (the model's).
std::string weights_dtype(const std::string& d) {
  const std::string v = lower(d);
  if (v == "auto" || v.empty()) return "auto";
  if (v == "bfloat16" || v == "bf16") return "bf16";
  if (v == "float16" || v == "half" || v == "fp16" || v == "float32" || v == "float") return "fp16";
  throw InputError(
      fmt::format("meta.json: dtype \"{}\": expected auto, bfloat16, float16, half "
                  "or float32",
                  d));
}

// vLLM's --kv-cache-dtype: "auto" is the model's dtype; fp8, fp8_e4m3 and fp8_e5m2 are 1 byte.
std::string kv_dtype(const std::string& d) {
  const std::string v = lower(d);
  if (v == "auto" || v.empty()) return "auto";
  if (v.rfind("fp8", 0) == 0) return "fp8";
  if (v == "bfloat16" || v == "bf16") return "bf16";
  if (v == "float16" || v == "half" || v == "fp16") return "fp16";
  throw InputError(
      fmt::format("meta.json: kv_cache_dtype \"{}\": expected auto, fp8, fp8_e4m3, "
                  "fp8_e5m2, bfloat16 or float16",
                  d));
}

}  // namespace

std::string catalog_model_for(const std::string& hf_name) {
  const size_t slash = hf_name.rfind('/');
  const std::string base = slash == std::string::npos ? hf_name : hf_name.substr(slash + 1);
  const Catalog& c = Catalog::builtin();
  if (c.models().count(lower(base)) != 0) return lower(base);
  for (const auto& [key, m] : c.models()) {
    if (m.display_name == hf_name || m.display_name == base) return key;
  }
  return "";
}

// vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults: on a GPU with at least 70 GiB that
// is not an A100, the OpenAI API server defaults to max_num_batched_tokens 8192 and max_num_seqs
// 1024; elsewhere to 2048 and 256 ("Setting large max_num_batched_tokens for A100 reduces
// throughput", vLLM PR 17885).
int64_t default_max_num_seqs(const GpuSpec& gpu) {
  const bool big = gpu.memory_bytes >= gib_to_bytes(70.0) && gpu.name.rfind("a100", 0) != 0;
  return big ? 1024 : 256;
}

int64_t default_max_num_batched_tokens(const GpuSpec& gpu) {
  const bool big = gpu.memory_bytes >= gib_to_bytes(70.0) && gpu.name.rfind("a100", 0) != 0;
  return big ? 8192 : 2048;
}

std::string vllm_scenario_yaml(const VllmScenarioInputs& in, const GpuSpec& gpu) {
  const VllmEngineArgs& e = in.engine;
  std::string y;
  y += "# Written by kvsim-validate vllm-run: the measured vLLM run's engine as a kvsim scenario\n";
  y += "# (validate/vllm_run/vllm_engine.cc says where each setting comes from).\n";
  y += "name: vllm-run\n";
  y += fmt::format(
      "description: {}\n",
      quoted(fmt::format("{} on {} (vLLM {})", e.model, gpu.name,
                         e.vllm_version.empty() ? "version not recorded" : e.vllm_version)));
  y += fmt::format("seed: {}\n", e.seed);
  y += fmt::format("model: {}\n", quoted(in.model));
  y += fmt::format("gpu: {}\n", quoted(in.gpu));
  y += "engine:\n";
  // The V1 engine schedules prefill chunks and decodes together under one token budget (chunked
  // prefill always on: vllm/v1/core/sched/scheduler.py) and preempts by recompute only.
  y += "  scheduler: continuous\n  chunked_prefill: true\n  preemption: recompute\n";
  y += "  attention: flash\n";
  // The version's host path (sim/serving/host_path.h): where output processing runs and when
  // a token counts; a V0 version (below 0.8) also turns async scheduling off.
  if (!e.vllm_version.empty()) y += fmt::format("  vllm_version: {}\n", quoted(e.vllm_version));
  y += fmt::format("  max_num_seqs: {}\n", e.max_num_seqs.value_or(default_max_num_seqs(gpu)));
  y += fmt::format("  max_num_batched_tokens: {}\n",
                   e.max_num_batched_tokens.value_or(default_max_num_batched_tokens(gpu)));
  // vLLM's SchedulerConfig.async_scheduling (vllm/config/scheduler.py; unset:
  // VllmConfig.__post_init__ resolves it, as kvsim's engine does),
  // SchedulerConfig.long_prefill_token_threshold (0: no cap) and SpeculativeConfig, each as the run
  // set it (engine_kwargs.cc checked them).
  if (e.async_scheduling) {
    y += fmt::format("  async_scheduling: {}\n", *e.async_scheduling ? "true" : "false");
  }
  if (e.long_prefill_token_threshold) {
    y += fmt::format("  long_prefill_token_threshold: {}\n", *e.long_prefill_token_threshold);
  }
  if (!e.speculative_config.empty())
    y += fmt::format("  speculative_config: {}\n", e.speculative_config);
  if (in.p2p != "auto") y += fmt::format("  p2p: {}\n", in.p2p);
  if (e.enforce_eager) y += "  enforce_eager: true\n";
  if (e.disable_custom_all_reduce) y += "  disable_custom_all_reduce: true\n";
  // Unset: the model's max_position_embeddings, as vLLM's ModelConfig derives max_model_len.
  if (e.max_model_len) y += fmt::format("  max_model_len: {}\n", *e.max_model_len);
  y += fmt::format("  tensor_parallel: {}\n", e.tensor_parallel);
  // Expert parallelism: vLLM turns it on only for a MoE model whose flattened DP x TP group has
  // more than one GPU (FusedMoEParallelConfig.make, vllm/model_executor/layers/fused_moe/config.py:
  // use_ep = dp_size * tp_size > 1 and enable_expert_parallel); a dense model has no FusedMoE
  // layer, so the flag changes nothing there.
  const bool ep = in.moe && e.expert_parallel && e.data_parallel * e.tensor_parallel > 1;
  // One engine (d = 1): EP over its TP group.
  if (e.data_parallel == 1 && ep) y += "  expert_parallel: true\n";
  y += fmt::format("  weights_dtype: {}\n  kv_cache_dtype: {}\n", weights_dtype(e.dtype),
                   kv_dtype(e.kv_cache_dtype));
  if (!in.profile.empty()) y += fmt::format("  profile: {}\n", quoted(in.profile.string()));
  // The KV pool: num_gpu_blocks_override when the run gave it; else vLLM's memory-profiling rule
  // (vllm/v1/worker/gpu_worker.py, Worker.determine_available_memory, with
  // vllm/utils/mem_utils.py memory_profiling): total x gpu_memory_utilization less the weights,
  // the profile run's activation peak and the non-torch memory (CUDA context, cuBLAS and NCCL
  // workspaces), divided into blocks of block_size tokens - what kvsim's paged store does
  // (docs/memory.md, `paged`).
  y += fmt::format("  kv:\n    type: paged\n    block_size: {}\n", e.block_size);
  if (e.num_gpu_blocks) {
    // vLLM's pool has num_gpu_blocks_override blocks (vllm/v1/core/kv_cache_utils.py,
    // may_override_num_blocks), of which BlockPool keeps the first as its null block
    // (vllm/v1/core/block_pool.py: null_block = free_block_queue.popleft()); kvsim's num_blocks
    // is the usable pool, one fewer (docs/memory.md, `paged`).
    y += fmt::format("    num_blocks: {}\n", std::max<int64_t>(1, *e.num_gpu_blocks - 1));
  } else {
    y += fmt::format("    gpu_memory_utilization: {}\n", e.gpu_memory_utilization);
  }
  y += fmt::format("    enable_prefix_caching: {}\n", e.enable_prefix_caching ? "true" : "false");
  y += fmt::format("workload:\n  trace:\n    path: {}\n", quoted(in.trace.string()));
  if (e.data_parallel > 1) {
    // Data parallelism: data_parallel_size engines, each with its own KV pool and scheduler;
    // the front end sends a request to the engine with the lowest 4 x waiting + running from
    // the counts the engines last published (vllm/v1/engine/core_client.py,
    // DPLBAsyncMPClient.get_core_engine_for_request): the dp_balance router, dense or MoE.
    y += fmt::format("cluster:\n  replicas:\n    - name: dp\n      count: {}\n", e.data_parallel);
    if (in.moe) {
      // A MoE model's replicas share their routed experts over the flattened DP x TP group:
      // with EP each GPU holds E / (d x t) whole experts and tokens reach them by all-to-all;
      // without it each GPU holds a 1 / (d x t) slice of every expert (flatten_tp_across_dp).
      // Attention and the dense layers stay on each replica's TP group (docs/models.md,
      // "Expert parallelism"). Their ranks step in lockstep (vllm/v1/engine/core.py,
      // DPEngineCoreProc: the group's `data_parallel: {lockstep: auto}` default for a MoE
      // model, CUDA graphs on as vLLM's default). A dense model's replicas are independent
      // engines.
      y += fmt::format("      engine: {{data_parallel: {}, expert_parallel: {}}}\n",
                       e.data_parallel, ep ? "true" : "false");
    }
    y += "  router: {type: dp_balance}\n";
  }
  y += "policies:\n  - name: vllm\n    guards: []\n";
  return y;
}

}  // namespace kvsim::validate
