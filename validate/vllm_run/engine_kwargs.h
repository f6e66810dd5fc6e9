// meta.json's `engine_kwargs` (vLLM's EngineArgs as the run passed them) as VllmEngineArgs. Every
// argument is either carried into the replayed scenario or refused at its own line:col: an
// argument dropped silently would make the replay run a different engine than the one measured.
#pragma once

#include <string>

#include "validate/vllm_run/json_fields.h"
#include "validate/vllm_run/measured_run.h"

namespace kvsim::validate {

// Reads the engine arguments of `f` (engine_kwargs, or meta.json's top level when it has none).
// `strict`: `f` is engine_kwargs itself, so a key that is not an engine argument kvsim carries
// (or one listed as not changing the engine) is refused. Values are checked with the scenario
// loader's ranges, so the scenario written from them never fails to load.
VllmEngineArgs read_engine_kwargs(const JsonFields& f, const std::string& fallback_model,
                                  bool strict);

}  // namespace kvsim::validate
