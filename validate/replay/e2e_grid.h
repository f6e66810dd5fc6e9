// The calibration grid of `kvsim-validate e2e`: the kernels the scenario's model runs in an
// iteration, at the shapes its engine asks for, so the fitted profile describes exactly the
// operations the forward pass executes (validate/grid.h is the format):
//   gemm          qkv (n = (H + 2 H_kv) D, k = hidden), o (hidden, H D), gate_up (2 ffn, hidden),
//                 down (hidden, ffn) at m = 1, 4, 16, 64, 256, 1024 batched tokens (up to the
//                 engine's max_num_batched_tokens); lm_head (vocab, hidden) at m = 1, 4, 16, 64
//                 (one row per sequence that emits a token)
//   flash/native  prefill attention (the engine's `attention`), H and H_kv heads of D, chunks of
//                 16, 64, 256, 512 new tokens after 0 and 256 cached ones (native: no cache);
//                 on cuda flash v2, the tiled kernel (v1 is a one-thread-per-row cross-check)
//   paged_decode  1, 8 and 32 sequences at contexts 32, 128, 512, 2048 (up to max_position), the
//                 scenario's block size
//   membw_copy    0.25 to 256 MiB (the elementwise class's bandwidth; 64 MiB and up: main memory)
// The scenario's engine keys are those of its top-level `engine:` with the first policy's on top.
#pragma once

#include <string>

#include "sim/config/scenario.h"

namespace kvsim::validate {

struct E2eShapes {
  int block_tokens = 16;              // engine.kv.block_size (default 16, vLLM's)
  int64_t max_batched_tokens = 2048;  // engine.max_num_batched_tokens
  bool native_attention = false;      // engine.attention: native
};

// The engine keys the grid and the forward pass need, from the scenario's tree.
E2eShapes e2e_shapes(const Scenario& s);

// The grid YAML for the scenario's model on `backend` (cpu: short timing, cuda: the usual one).
std::string e2e_grid_yaml(const Scenario& s, const std::string& backend);

}  // namespace kvsim::validate
