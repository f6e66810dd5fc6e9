// vLLM's engine arguments as a kvsim scenario: the same model, GPU, batch limits, block size,
// memory utilisation, prefix caching and parallelism, with vLLM's defaults where the run left an
// argument unset (each rule cited where it is applied, vllm_engine.cc; docs/fidelity.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "models/gpu_spec.h"
#include "validate/vllm_run/measured_run.h"

namespace kvsim::validate {

struct VllmScenarioInputs {
  VllmEngineArgs engine;
  std::string model;              // a catalog name or a config.json path (absolute)
  std::string gpu;                // a catalog GPU name
  std::filesystem::path trace;    // normalized CSV (arrival_s,prompt_tokens,output_tokens)
  std::filesystem::path profile;  // latency profile ("" = the GPU's built-in one)
  std::string p2p = "auto";       // engine.p2p: auto | on | off
  bool moe = false;               // the model has routed experts (FusedMoE layers)
};

// The catalog model a Hugging Face name refers to: a catalog key equal to the name after the
// organisation, lower-cased ("meta-llama/Llama-3.1-8B" -> llama-3.1-8b), or an entry whose
// display_name is the name (with or without the organisation). "" when none.
std::string catalog_model_for(const std::string& hf_name);

// vLLM's max_num_seqs and max_num_batched_tokens when the run left them unset, for the OpenAI
// API server on `gpu` (vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults).
int64_t default_max_num_seqs(const GpuSpec& gpu);
int64_t default_max_num_batched_tokens(const GpuSpec& gpu);

// The scenario YAML text kvsim runs for the measured run (one policy, `vllm`).
std::string vllm_scenario_yaml(const VllmScenarioInputs& in, const GpuSpec& gpu);

}  // namespace kvsim::validate
