// A validation grid (validate/grids/*.yaml): explicit axes per kernel class, expanded into cases
// by their cross product, plus timing and checking options. Format:
//
//   name: quick
//   seed: 1                          # inputs come from this seed
//   timing: {warmup: 3, repetitions: 15, flush_l2: true}
//   check: {max_flops: 2.0e9, max_bytes: 67108864}   # check cases up to these sizes
//   holdout_every: 3                 # every 3rd modelled case of a class is held out
//   kernels:
//     - {class: flash, versions: [1, 2], dtypes: [fp16, bf16], batch: [1], heads: [16],
//        kv_heads: [16, 4], seq: [512, 1024], context: [0], head_dim: [64, 128],
//        causal: [true, false]}
//     - {class: paged_decode, versions: [1], dtypes: [fp16], batch: [8], heads: [32],
//        kv_heads: [8], head_dim: [128], context: [1024], block_size: [8, 16, 32, 64]}
//     - {class: gemm, versions: [1, 2], dtypes: [fp16], m: [1, 512], n: [4096], k: [4096]}
//     - {class: membw_copy, versions: [1], bytes_mib: [64, 1024]}   # also membw_read
//
// For attention, seq is the number of new query tokens and context the tokens already cached
// (seq_q = seq, seq_kv = seq + context). Only the highest version of a class in the grid is
// fitted (the latency model describes one implementation per class); lower versions, non-causal
// flash and membw_read are measured but get split "none". dtypes: fp16 (default), bf16, fp32
// (CPU-only: 4 bytes per element, nothing rounded; the CUDA backend skips it); the membw
// classes move bytes, whatever their type.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "validate/kernel_case.h"

namespace kvsim::validate {

struct TimingOptions {
  int warmup = 2;
  int repetitions = 10;
  bool flush_l2 = true;  // CUDA only: the CPU backend does not flush its caches
};

struct Grid {
  std::string name;
  std::string source;  // the file it came from
  uint64_t seed = 1;
  TimingOptions timing;
  double check_max_flops = 2e9;
  int64_t check_max_bytes = int64_t{64} << 20;
  int holdout_every = 3;
  std::vector<KernelCase> cases;  // in file order, axes varying last-listed fastest
};

// Parses and expands a grid. `backend` "cpu" collapses every versions list to the CPU
// implementation (version 0). Throws ConfigError (file:line:col) on schema errors and unknown
// keys, InputError on invalid shapes.
Grid load_grid(const std::filesystem::path& path, const std::string& backend);
Grid parse_grid(const std::string& yaml_text, const std::string& source,
                const std::string& backend);

// Whether the simulator's latency model has a term for this case (see validate/kernel_model.h).
bool modelled_kind(const KernelCase& c);

}  // namespace kvsim::validate
