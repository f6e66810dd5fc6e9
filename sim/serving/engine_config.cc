#include "sim/serving/engine_config.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/config_node.h"
#include "core/units.h"
#include "models/model_spec.h"
#include "sim/serving/scheduler.h"

namespace kvsim {

namespace {

// A V0 engine (vllm_version below 0.8): no AsyncScheduler, and async output processing, which
// vLLM turns off with speculative decoding (ModelConfig.verify_async_output_proc).
void check_v0_engine(EngineConfig& c, const ConfigNode& e, std::optional<bool> async,
                     const Scheduler& scheduler) {
  const std::string& v = c.vllm_version->text;
  if (async && *async) {
    e.peek("async_scheduling")
        ->fail(fmt::format(
            "vLLM {} is a V0 engine, which has no async scheduling (V1's AsyncScheduler); set "
            "async_scheduling: false or leave it unset",
            v));
  }
  c.async_scheduling = false;
  if (c.speculative) {
    e.peek("speculative_config")
        ->fail(fmt::format(
            "vLLM {} runs speculative decoding without async output processing; that V0 host path "
            "is not modelled",
            v));
  }
  if (!scheduler.in_vllm_v0()) {
    e.peek("scheduler")
        ->fail(fmt::format(
            "vLLM {} schedules with its V0 Scheduler: scheduler: vllm_v0 (chunked prefill off) or "
            "continuous (chunked prefill on), not '{}'",
            v, c.scheduler));
  }
}

// The scheduler the engine names, into c.scheduler; the other keys ask it what it supports
// (runs_speculation, caps_long_prefills, plans_ahead, in_vllm_v0), never its name.
std::unique_ptr<Scheduler> chosen_scheduler(const ConfigNode& e, EngineConfig& c) {
  const auto& entry = scheduler_registry().choose(e, "scheduler", "continuous");
  c.scheduler = entry.name;
  return entry.make();
}

// limit_mm_per_prompt: whether it turns images off ({image: 0}).
bool images_off(const ConfigNode& e) {
  const std::optional<ConfigNode> mm = e.optional_child("limit_mm_per_prompt");
  if (!mm || mm->is_null()) return false;
  if (!mm->is_map()) mm->fail_expected("a map of modality to items per prompt, e.g. {image: 0}");
  mm->allow({"image", "video", "audio"});
  const bool off = mm->get<int64_t>("image", 1, {.min = 0, .max = 1e6}) == 0;
  mm->get<int64_t>("video", 0, {.min = 0, .max = 1e6});
  mm->get<int64_t>("audio", 0, {.min = 0, .max = 1e6});
  mm->reject_unknown_keys();
  return off;
}

}  // namespace

EngineConfig parse_engine_config(const ConfigNode& e) {
  EngineConfig c;
  if (e.is_null()) return c;
  if (!e.is_map()) e.fail_expected("an engine section (a map)");
  const std::unique_ptr<Scheduler> scheduler = chosen_scheduler(e, c);
  c.max_num_seqs = e.get<int64_t>("max_num_seqs", c.max_num_seqs, {.min = 1, .max = 1e7});
  c.max_num_batched_tokens =
      e.get<int64_t>("max_num_batched_tokens", c.max_num_batched_tokens, {.min = 1, .max = 1e9});
  c.chunked_prefill = e.get<bool>("chunked_prefill", false);
  c.scheduler_reserve_full_isl = e.get<bool>("scheduler_reserve_full_isl", true);
  c.fast_forward = e.get<bool>("fast_forward", true);
  c.long_prefill_token_threshold =
      e.get<int64_t>("long_prefill_token_threshold", 0, {.min = 0, .max = 1e9});
  if (c.long_prefill_token_threshold > 0 &&
      !(c.chunked_prefill && scheduler->caps_long_prefills())) {
    e.peek("long_prefill_token_threshold")
        ->fail(
            "long_prefill_token_threshold caps a prefill's chunk: it needs scheduler: "
            "continuous with chunked_prefill: true");
  }
  // vLLM resolves an unset async_scheduling to on for its V1 engine; the V0-style schedulers
  // (static, vllm_v0) plan after each step ends and refuse it.
  const std::optional<bool> async = e.get_optional<bool>("async_scheduling");
  c.vllm_version = parse_vllm_version(e);
  c.host_path = host_path_of(c.vllm_version);
  c.speculative = parse_speculative_config(e);
  c.kv_offloading = parse_kv_offloading(e);
  if (c.speculative) {
    const ConfigNode spec = *e.peek("speculative_config");
    if (!scheduler->runs_speculation()) {
      spec.fail(
          fmt::format("speculative decoding is modelled as vLLM V1's scheduler runs it: it "
                      "needs scheduler: continuous, not '{}'",
                      c.scheduler));
    }
  }
  if (c.host_path == HostPath::kV0AsyncOutput) {
    check_v0_engine(c, e, async, *scheduler);
  } else if (scheduler->plans_ahead()) {
    // With speculation vLLM resolves an unset value by the method (async_by_default).
    c.async_scheduling = async.value_or(!c.speculative || c.speculative->async_by_default());
    if (async && *async && c.speculative && !c.speculative->async_allowed()) {
      e.peek("async_scheduling")
          ->fail(fmt::format(
              "vLLM runs speculative decoding with async scheduling only for EAGLE-style methods "
              "and draft_model, not method {}; set async_scheduling: false or leave it unset",
              c.speculative->method_name));
    }
  } else {
    if (async && *async) {
      e.peek("async_scheduling")
          ->fail(fmt::format(
              "async_scheduling is vLLM V1's AsyncScheduler, which the '{}' scheduler does not "
              "have "
              "(it plans each step after the one before has ended); use scheduler: continuous or "
              "set async_scheduling: false",
              c.scheduler));
    }
    c.async_scheduling = false;
  }
  c.max_model_len = e.get<int64_t>("max_model_len", 0, {.min = 1, .max = 1e12});
  c.allow_long_max_model_len = e.get<bool>("allow_long_max_model_len", false);
  if (auto q = e.get_optional<double>("max_queue_time_s",
                                      {.min = 0, .max = 1e9, .min_exclusive = true})) {
    c.max_queue_time = seconds_to_sim(*q);
  }
  c.batch_size = e.get<int64_t>("batch_size", c.batch_size, {.min = 1, .max = 1e6});
  using Policy = EngineConfig::SchedulingPolicy;
  c.scheduling_policy =
      e.get_enum<Policy>("scheduling_policy",
                         {{"fcfs", Policy::kFcfs},
                          {"priority", Policy::kPriority},
                          {"shortest_prompt_first", Policy::kShortestPromptFirst}},
                         Policy::kFcfs);
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
  if (e.optional_child("attention_kernel")) {
    const std::string k = e.get_enum("attention_kernel", {"auto", "fa2", "fa3"});
    if (k != "auto") c.attention_kernel = k == "fa3" ? FlashKernel::kFa3 : FlashKernel::kFa2;
  }
  c.tensor_parallel = e.get<int>("tensor_parallel", 1, {.min = 1, .max = 64});
  if (c.speculative && c.speculative->draft_tensor_parallel &&
      *c.speculative->draft_tensor_parallel != c.tensor_parallel) {
    e.child("speculative_config")
        .child("draft_tensor_parallel_size")
        .fail(fmt::format("a drafter under another tensor parallelism than the target's ({}) is "
                          "not modelled",
                          c.tensor_parallel));
  }
  c.pipeline_parallel = e.get<int>("pipeline_parallel", 1, {.min = 1, .max = 64});
  c.data_parallel = e.get<int>("data_parallel", 1, {.min = 1, .max = 1024});
  c.expert_parallel = e.get<bool>("expert_parallel", false);
  c.p2p = e.get_enum<P2pSetting>(
      "p2p", {{"auto", P2pSetting::kAuto}, {"on", P2pSetting::kOn}, {"off", P2pSetting::kOff}},
      P2pSetting::kAuto);
  c.disable_custom_all_reduce = e.get<bool>("disable_custom_all_reduce", false);
  c.enforce_eager = e.get<bool>("enforce_eager", false);
  // "auto" (vLLM's default for --kv-cache-dtype) and an absent key keep the model's own type.
  if (c.host_path == HostPath::kV0AsyncOutput && c.pipeline_parallel > 1) {
    e.peek("pipeline_parallel")
        ->fail(
            fmt::format("vLLM {} turns async output processing off with pipeline parallelism "
                        "(ModelConfig.verify_async_output_proc); that V0 host path is not modelled",
                        c.vllm_version->text));
  }
  if (e.optional_child("weights_dtype")) {
    const std::string w = e.get_enum(
        "weights_dtype", {"auto", "fp16", "bf16", "fp8", "int8", "int4", "mxfp4", "nvfp4"});
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
  if (auto st = e.optional_child("step_time"); st && !st->is_null()) {
    c.step_time = parse_fixed_step_time(*st);
  }
  c.images_off = images_off(e);
  e.allow({"kv"});  // read by the memory pool
  return c;
}

void resolve_model_limits(EngineConfig& c, const ConfigNode& e, const ModelSpec& model) {
  if (c.kv_offloading) check_kv_offloading_model(e, model);
  const std::optional<ConfigNode> len_node = e.is_map() ? e.peek("max_model_len") : std::nullopt;
  if (c.max_model_len == 0) {
    c.max_model_len = model.max_position;
  } else if (c.max_model_len > model.max_position && !c.allow_long_max_model_len) {
    // vLLM's ModelConfig refuses it too, unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set.
    len_node->fail(fmt::format(
        "max_model_len {} is above {}'s max_position {}; positions past it were never trained "
        "(set allow_long_max_model_len: true to run it anyway)",
        c.max_model_len, model.name, model.max_position));
  }
  // A scheduler without the chunked_prefill key (static) prefills whole prompts whatever it says.
  const auto* entry = scheduler_registry().find(c.scheduler);
  const bool can_chunk = entry != nullptr && std::find(entry->keys.begin(), entry->keys.end(),
                                                       "chunked_prefill") != entry->keys.end();
  if (c.chunked_prefill && can_chunk) return;
  const std::optional<ConfigNode> batched_node =
      e.is_map() ? e.peek("max_num_batched_tokens") : std::nullopt;
  if (!batched_node || batched_node->is_null()) {
    c.max_num_batched_tokens = std::max(c.max_num_batched_tokens, c.max_model_len);
  } else if (c.max_num_batched_tokens < c.max_model_len) {
    // vLLM's SchedulerConfig check: without chunking a whole prompt must fit one iteration.
    batched_node->fail(fmt::format(
        "max_num_batched_tokens {} is below max_model_len {} with chunked_prefill off: a prompt "
        "longer than the batch could never be scheduled; raise max_num_batched_tokens, lower "
        "max_model_len, or turn chunked_prefill on",
        c.max_num_batched_tokens, c.max_model_len));
  }
}

CollectiveSettings collective_settings(const EngineConfig& c) {
  CollectiveSettings s;
  s.p2p = c.p2p;
  s.disable_custom_all_reduce = c.disable_custom_all_reduce;
  s.enforce_eager = c.enforce_eager;
  const int spec = c.speculative ? c.speculative->num_speculative_tokens : 0;
  s.max_graph_tokens = default_max_graph_tokens(c.max_num_seqs, c.max_num_batched_tokens, spec);
  return s;
}

}  // namespace kvsim
