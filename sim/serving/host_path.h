// The vLLM version being modelled (`engine.vllm_version`) and what it decides beside the kernels:
// where a step's output processing runs and when a token becomes visible to the client
// (docs/latency.md, "The host path of a vLLM version").
//
//   V1 (vLLM >= 0.8.0, where V1 became the default engine: "V1 is now enabled by default",
//   vLLM's docs/source/getting_started/v1_user_guide.md as of PR 15064): the EngineCore process
//   only samples; the API server's AsyncLLM output handler detokenises
//   (OutputProcessor.process_outputs), so output processing never blocks the GPU loop and a
//   token is counted when its step ends. This is kvsim's default (no key).
//
//   V0 with async output processing (vLLM 0.6.0 to 0.7.x, PR 7049 implementing RFC 6913; on
//   unless ModelConfig.verify_async_output_proc turns it off): step N's outputs are processed
//   by LLMEngine._process_model_outputs, called back by the model runner of step N+1 right
//   before its sampler (ModelRunner.execute_model, model_input.async_callback), i.e. on the CPU
//   while N+1's forward runs. That call stamps first-token time, TTFT and the request's end
//   (SequenceGroup.maybe_set_first_token_time, LLMEngine._get_stats), so step N's tokens are
//   visible once step N+1's host work and that processing are done; with nothing scheduled
//   next, LLMEngine.step drains the queue at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kvsim {

class ConfigNode;

struct VllmVersion {
  int major = 0, minor = 0, patch = 0;
  std::string text;  // as written ("0.6.0")
};

enum class HostPath {
  kV1FrontEnd,     // output processing in the front-end process (the default)
  kV0AsyncOutput,  // V0 LLMEngine, step N's outputs processed during step N+1's forward
};

// Reads `vllm_version` ("MAJOR.MINOR" or "MAJOR.MINOR.PATCH", a pre-release suffix after '-',
// '+' or a letter ignored: "0.6.0", "0.19.0", "0.6.1.post1"). nullopt when absent. Throws
// ConfigError at the key for a malformed string, and for a V0 version without async output
// processing (before 0.6.0: not modelled).
std::optional<VllmVersion> parse_vllm_version(const ConfigNode& engine);

// The host path of a version: V0 below 0.8.0, V1 from there on; V1 without a version.
HostPath host_path_of(const std::optional<VllmVersion>& version);

// Seconds _process_model_outputs takes for a step of `seqs` scheduled sequences: the line
// through RFC 6913's two measurements for Llama-3-70B FP8 on 4 x H100 (0.2 ms at batch 1,
// 3.4 ms at batch 32; shared/reference/measured/collectives/README.md, "Output processing"):
// 0.2 ms + (seqs - 1) x 3.2 / 31 ms (about 0.0968 ms + 0.1032 ms per sequence).
double v0_output_processing_s(int64_t seqs);

}  // namespace kvsim
