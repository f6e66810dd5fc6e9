#include "sim/serving/engine_config.h"

#include <filesystem>

#include "core/config_node.h"
#include "core/units.h"
#include "sim/serving/scheduler.h"

namespace kvsim {

EngineConfig parse_engine_config(const ConfigNode& e) {
  EngineConfig c;
  if (e.is_null()) return c;
  if (!e.is_map()) e.fail_expected("an engine section (a map)");
  c.scheduler = scheduler_registry().choose(e, "scheduler", "continuous").name;
  c.max_num_seqs = e.get<int64_t>("max_num_seqs", c.max_num_seqs, {.min = 1, .max = 1e7});
  c.max_num_batched_tokens =
      e.get<int64_t>("max_num_batched_tokens", c.max_num_batched_tokens, {.min = 1, .max = 1e9});
  c.chunked_prefill = e.get<bool>("chunked_prefill", false);
  c.batch_size = e.get<int64_t>("batch_size", c.batch_size, {.min = 1, .max = 1e6});
  using Preemption = EngineConfig::Preemption;
  c.preemption = e.get_enum<Preemption>("preemption",
                                        {{"recompute", Preemption::kRecompute},
                                         {"swap", Preemption::kSwap},
                                         {"off", Preemption::kOff}},
                                        Preemption::kRecompute);
  c.swap_space_bytes = gib_to_bytes(e.get<double>("swap_space_gb", 4.0, {.min = 0, .max = 1e6}));
  using OnOom = EngineConfig::OnOom;
  c.on_oom = e.get_enum<OnOom>(
      "on_oom", {{"crash", OnOom::kCrash}, {"abort_request", OnOom::kAbortRequest}}, OnOom::kCrash);
  c.restart = seconds_to_sim(e.get<double>("restart_s", 90.0, {.min = 0, .max = 1e7}));
  c.attention = e.get_enum<AttentionKind>(
      "attention", {{"flash", AttentionKind::kFlash}, {"native", AttentionKind::kNative}},
      AttentionKind::kFlash);
  c.tensor_parallel = e.get<int>("tensor_parallel", 1, {.min = 1, .max = 64});
  c.pipeline_parallel = e.get<int>("pipeline_parallel", 1, {.min = 1, .max = 64});
  // "auto" (vLLM's default for --kv-cache-dtype) and an absent key keep the model's own type.
  if (e.optional_child("weights_dtype")) {
    const std::string w = e.get_enum("weights_dtype", {"auto", "fp16", "bf16", "fp8", "int8", "int4"});
    if (w != "auto") c.weights_dtype = parse_dtype(w);
  }
  if (e.optional_child("kv_cache_dtype")) {
    const std::string kv = e.get_enum("kv_cache_dtype", {"auto", "fp16", "bf16", "fp8"});
    if (kv != "auto") c.kv_cache_dtype = parse_dtype(kv);
  }
  c.workspace_bytes = gib_to_bytes(e.get<double>("workspace_gb", 0.5, {.min = 0, .max = 1e6}));
  if (auto profile = e.get_optional<std::string>("profile")) {
    std::filesystem::path p = *profile;
    if (p.is_relative()) p = std::filesystem::path(e.source()).parent_path() / p;
    c.profile_path = p.string();
  }
  e.allow({"kv"});  // read by the memory pool
  return c;
}

}  // namespace kvsim
