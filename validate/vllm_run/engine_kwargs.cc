#include "validate/vllm_run/engine_kwargs.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "core/echo_text.h"
#include "validate/vllm_run/vllm_engine.h"

namespace kvsim::validate {

namespace {

using Json = nlohmann::json;

// The engine arguments carried into the scenario (vllm_engine.cc writes each).
constexpr std::array<std::string_view, 20> kCarried = {"model",
                                                       "tensor_parallel_size",
                                                       "data_parallel_size",
                                                       "enable_expert_parallel",
                                                       "max_num_seqs",
                                                       "max_num_batched_tokens",
                                                       "max_model_len",
                                                       "num_gpu_blocks_override",
                                                       "num_gpu_blocks",
                                                       "block_size",
                                                       "gpu_memory_utilization",
                                                       "enable_prefix_caching",
                                                       "dtype",
                                                       "kv_cache_dtype",
                                                       "seed",
                                                       "speculative_config",
                                                       "async_scheduling",
                                                       "long_prefill_token_threshold",
                                                       "enforce_eager",
                                                       "disable_custom_all_reduce"};
// Arguments that change neither the schedule nor the memory (where the weights come from, how
// requests are logged, the name the API serves): accepted and not carried.
constexpr std::array<std::string_view, 9> kNoEffect = {
    "trust_remote_code", "disable_log_stats", "disable_log_requests",
    "served_model_name", "tokenizer",         "tokenizer_revision",
    "revision",          "download_dir",      "load_format"};
// The keys of vLLM's speculative_config kvsim models, plus its own acceptance keys.
constexpr std::array<std::string_view, 6> kSpeculativeKeys = {
    "method",          "num_speculative_tokens", "model", "draft_tensor_parallel_size",
    "acceptance_rate", "acceptance_per_position"};

template <size_t N>
bool listed(const std::array<std::string_view, N>& keys, const std::string& k) {
  return std::find(keys.begin(), keys.end(), k) != keys.end();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// vLLM's --dtype and --kv-cache-dtype choices kvsim models (vllm_engine.cc maps them).
void check_dtypes(const JsonFields& f, const VllmEngineArgs& e) {
  const std::string w = lower(e.dtype);
  if (!(w == "auto" || w == "bfloat16" || w == "bf16" || w == "float16" || w == "half" ||
        w == "fp16" || w == "float32" || w == "float")) {
    f.fail("dtype",
           fmt::format("'dtype': \"{}\": expected auto, bfloat16, float16, half or float32",
                       echo_text(e.dtype)));
  }
  const std::string kv = lower(e.kv_cache_dtype);
  if (!(kv == "auto" || kv.rfind("fp8", 0) == 0 || kv == "bfloat16" || kv == "bf16" ||
        kv == "float16" || kv == "half" || kv == "fp16")) {
    f.fail("kv_cache_dtype", fmt::format("'kv_cache_dtype': \"{}\": expected auto, fp8, fp8_e4m3, "
                                         "fp8_e5m2, bfloat16 or float16",
                                         echo_text(e.kv_cache_dtype)));
  }
}

// vLLM's speculative_config (vllm/config/speculative.py, SpeculativeConfig) as the scenario's
// engine speculative_config, which takes vLLM's key names (sim/serving/speculative_config.h),
// written as a JSON flow map. vLLM records no acceptance rate, so the meta.json must add kvsim's
// acceptance_rate or acceptance_per_position (from the run's spec-decode metrics). An EAGLE or
// MTP drafter's `model` (its checkpoint) is not carried: kvsim builds that drafter from the
// target's shape; a draft_model's `model` is carried as its catalog name.
std::string speculative_flow(const JsonFields& engine, const std::string& text,
                             const std::string& where, int tensor_parallel) {
  const Json& v = engine.json().at("speculative_config");
  if (!v.is_object()) {
    engine.fail("speculative_config",
                fmt::format("'speculative_config': expected an object, got {}", describe_json(v)));
  }
  const JsonFields s(v, text, where);
  for (const auto& [k, ignored] : v.items()) {
    if (!listed(kSpeculativeKeys, k)) {
      s.fail(k, fmt::format("speculative_config '{}': not modelled by kvsim (it models method, "
                            "num_speculative_tokens, model, draft_tensor_parallel_size)",
                            echo_text(k)));
    }
  }
  nlohmann::ordered_json out;
  const std::string method = s.string("method", "");
  static constexpr std::array<std::string_view, 6> kMethods = {"eagle", "eagle3",    "mtp",
                                                               "ngram", "ngram_gpu", "draft_model"};
  if (!listed(kMethods, method)) {
    s.fail("method",
           fmt::format("speculative_config 'method': \"{}\": expected eagle, eagle3, mtp, "
                       "ngram, ngram_gpu or draft_model",
                       echo_text(method)));
  }
  out["method"] = method;
  out["num_speculative_tokens"] = s.integer("num_speculative_tokens", 1, 64);
  if (method == "draft_model") {
    const std::string name = s.string("model", "");
    const std::string catalog = catalog_model_for(name);
    if (catalog.empty()) {
      s.fail("model", fmt::format("speculative_config 'model': \"{}\" is not in kvsim's catalog",
                                  echo_text(name)));
    }
    out["model"] = catalog;
  }
  if (s.has("acceptance_rate") == s.has("acceptance_per_position")) {
    engine.fail("speculative_config",
                "speculative_config: vLLM records no acceptance rate; add exactly one of "
                "acceptance_rate or acceptance_per_position (from the run's spec-decode metrics)");
  }
  if (s.has("acceptance_rate")) {
    const double a = s.number("acceptance_rate");
    if (!(a >= 0 && a <= 1))
      s.fail("acceptance_rate", "'acceptance_rate': expected a number in [0, 1]");
    out["acceptance_rate"] = a;
  } else {
    const Json& list = s.at("acceptance_per_position");
    const int64_t k = out["num_speculative_tokens"].get<int64_t>();
    if (!list.is_array() || static_cast<int64_t>(list.size()) != k) {
      s.fail("acceptance_per_position", fmt::format("'acceptance_per_position': expected a list of "
                                                    "{} rates (num_speculative_tokens)",
                                                    k));
    }
    double before = 1;
    for (const Json& r : list) {
      if (!r.is_number() || !(r.get<double>() >= 0 && r.get<double>() <= before)) {
        s.fail("acceptance_per_position",
               "'acceptance_per_position': expected rates in [0, 1], "
               "none above the one before");
      }
      before = r.get<double>();
    }
    out["acceptance_per_position"] = list;
  }
  if (const auto dtp = s.opt_integer("draft_tensor_parallel_size", 1, 64)) {
    if (*dtp != tensor_parallel) {
      s.fail("draft_tensor_parallel_size",
             "'draft_tensor_parallel_size': a drafter under another tensor parallelism than the "
             "target's is not modelled");
    }
  }
  return out.dump();
}

}  // namespace

VllmEngineArgs read_engine_kwargs(const JsonFields& f, const std::string& fallback_model,
                                  bool strict) {
  if (strict) {
    for (const auto& [k, ignored] : f.json().items()) {
      if (!listed(kCarried, k) && !listed(kNoEffect, k)) {
        f.fail(k, fmt::format("engine argument '{}' is not carried into kvsim's replay (it would "
                              "replay a different engine than the one measured)",
                              echo_text(k)));
      }
    }
  }
  VllmEngineArgs e;
  e.model = f.string("model", fallback_model);
  // The scenario loader's ranges (sim/serving/engine_config.cc, models/memory/kv_store_factory.cc).
  e.tensor_parallel = static_cast<int>(f.opt_integer("tensor_parallel_size", 1, 64).value_or(1));
  e.data_parallel = static_cast<int>(f.opt_integer("data_parallel_size", 1, 1024).value_or(1));
  e.expert_parallel = f.boolean("enable_expert_parallel", false);
  e.max_num_seqs = f.opt_integer("max_num_seqs", 1, 1 << 20);
  e.max_num_batched_tokens = f.opt_integer("max_num_batched_tokens", 1, 1'000'000'000);
  e.max_model_len = f.opt_integer("max_model_len", 1, int64_t{1} << 32);
  // kvsim's pool is one block fewer (the null block) and holds at most 2^31 - 1.
  e.num_gpu_blocks = f.opt_integer("num_gpu_blocks_override", 2, int64_t{1} << 31);
  if (!e.num_gpu_blocks) e.num_gpu_blocks = f.opt_integer("num_gpu_blocks", 2, int64_t{1} << 31);
  e.block_size = static_cast<int>(f.opt_integer("block_size", 1, 1 << 16).value_or(16));
  if (f.has("gpu_memory_utilization")) {
    e.gpu_memory_utilization = f.number("gpu_memory_utilization");
    if (!(e.gpu_memory_utilization > 0 && e.gpu_memory_utilization <= 1)) {
      f.fail("gpu_memory_utilization",
             fmt::format("'gpu_memory_utilization': expected a number in (0, 1], got {}",
                         e.gpu_memory_utilization));
    }
  }
  e.enable_prefix_caching = f.boolean("enable_prefix_caching", true);
  e.dtype = f.string("dtype", "auto");
  e.kv_cache_dtype = f.string("kv_cache_dtype", "auto");
  check_dtypes(f, e);
  e.seed = static_cast<uint64_t>(f.opt_integer("seed", 0, 9'000'000'000'000'000).value_or(0));
  if (f.has("async_scheduling")) e.async_scheduling = f.boolean("async_scheduling", true);
  e.long_prefill_token_threshold = f.opt_integer("long_prefill_token_threshold", 0, 1'000'000'000);
  // How vLLM runs its collectives (docs/latency.md "Collectives"): --enforce-eager captures no
  // CUDA graph; --disable-custom-all-reduce leaves the all-reduce to symm-mem or NCCL.
  e.enforce_eager = f.boolean("enforce_eager", false);
  e.disable_custom_all_reduce = f.boolean("disable_custom_all_reduce", false);
  if (f.has("speculative_config")) {
    e.speculative_config = speculative_flow(f, f.text(), f.where(), e.tensor_parallel);
    if (e.async_scheduling.value_or(false) &&
        f.json()["speculative_config"].value("method", "") == "ngram") {
      f.fail("async_scheduling",
             "vLLM runs the CPU ngram drafter without async scheduling "
             "(it raises for async_scheduling: true)");
    }
  }
  return e;
}

}  // namespace kvsim::validate
