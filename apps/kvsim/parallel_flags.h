// The flags `kvsim kv`, `kvsim latency` and `kvsim mem` share with a scenario's engine keys
// tensor_parallel, pipeline_parallel, data_parallel, expert_parallel, weights_dtype and
// kv_cache_dtype (docs/memory.md, docs/models.md "Expert parallelism").
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "models/parallelism.h"

namespace kvsim::cli {

struct ParallelFlags {
  int tp = 1;
  int pp = 1;
  int dp = 1;                 // data-parallel replicas (vLLM --data-parallel-size): figures for one
  bool ep = false;            // expert parallelism (vLLM --enable-expert-parallel)
  std::string weights_dtype;  // empty: the model's own
  std::string kv_dtype;       // empty: the model's own (only where with_kv_dtype)

  Parallelism parallelism() const { return {tp, pp, dp, ep}; }
  // The model with the dtype flags applied (the whole model, not one GPU's share).
  ModelSpec apply_dtypes(ModelSpec model) const;
};

// Adds --tp, --pp, --dp, --ep, --weights-dtype and, when with_kv_dtype, --kv-dtype to `cmd`.
void add_parallel_flags(CLI::App& cmd, ParallelFlags& flags, bool with_kv_dtype);

// The stage whose GPU holds the most KV bytes per token (then the most weight bytes): the one a
// calculator without a GPU budget reports. 0 on one stage.
int heaviest_stage(const ModelSpec& model, Parallelism par);

}  // namespace kvsim::cli
