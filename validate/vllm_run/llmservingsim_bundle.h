// Reading one LLMServingSim perf bundle (perf/<GPU>/<org>/<model>/<dtype>/: meta.yaml and tpN/
// CSV files) and the kernel cases its rows become, at the model's per-GPU shapes under tensor
// parallelism (vLLM's sharding, models/parallelism.h). Used by `import llmservingsim`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "models/gpu_spec.h"
#include "models/latency/profile.h"
#include "models/model_spec.h"
#include "validate/kernel_case.h"

namespace kvsim::validate {

// A CSV file as rows of named fields, each row with its line number for messages.
struct BundleCsv {
  std::filesystem::path path;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> lines;

  // The index of column `name`; InputError "<file>:1: no column" when absent.
  size_t col(const std::string& name) const;
  // Field (row, c) as a finite number; InputError naming file:line and column otherwise.
  double num(size_t row, size_t c) const;
  // Field (row, c) as a whole count in [min, 2^31 - 1] (tokens, sequences); InputError naming
  // file:line and column otherwise (a fraction, 1e30 or a negative count).
  int64_t count(size_t row, size_t c, int64_t min) const;
};
BundleCsv read_bundle_csv(const std::filesystem::path& path);

// meta.yaml's top-level scalars the import reads (the other keys, the grids and LLMServingSim's
// own skew fit, are not read).
struct BundleMeta {
  std::string gpu, model, vllm_version;
  int block_size = 16;
};
BundleMeta read_bundle_meta(const std::filesystem::path& file);

// The catalog GPU whose display name is `display` ("" when none).
std::string catalog_gpu_for(const std::string& display);

// The per-GPU dimensions of the model under tensor parallelism `tp`.
struct BundleDims {
  int64_t hidden, q, kv, ffn, vocab, heads, kv_heads, head_dim;
  // The Q plus K width of the `qk_norm` rows: the whole model's at every TP degree, since the
  // bundles' tpN/ folders hold the tp1/ rows of that op unchanged (identical to the last digit in
  // all 152 rows of both Qwen3 bundles, while every op that TP shards was timed anew).
  int64_t qk_norm_width;
};
BundleDims bundle_dims(const ModelSpec& m, int tp);

KernelCase gemm_case(int64_t m, int64_t k, int64_t n);
// A causal flash-attention chunk of `chunk` new tokens after `cached` ones.
KernelCase flash_case(const BundleDims& d, int64_t chunk, int64_t cached);
// A paged decode of n sequences of `context` tokens each.
KernelCase decode_case(const BundleDims& d, int64_t n, int64_t context, int64_t block);
// A dense.csv op as the case the latency model costs it with; nullopt for an op it has no term
// for.
std::optional<KernelCase> dense_case(const std::string& op, int64_t tokens, const BundleDims& d);

// Attention seconds kvsim's engine charges one layer of a batch of one prefill chunk (`pc` new
// tokens after `kp` cached ones; none when pc = 0) and `nd` decodes of `kd` tokens each: the
// attention_prefill and attention_decode operations of the same iteration.
double attention_seconds(const BundleDims& d, const GpuSpec& gpu, const Profile& p, int64_t pc,
                         int64_t kp, int64_t nd, int64_t kd, int block);

}  // namespace kvsim::validate
