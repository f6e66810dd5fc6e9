#include "apps/kvsim/parallel_flags.h"

namespace kvsim::cli {

ModelSpec ParallelFlags::apply_dtypes(ModelSpec model) const {
  if (!weights_dtype.empty()) model.weight_dtype = parse_dtype(weights_dtype);
  if (!kv_dtype.empty()) model.kv_dtype = parse_dtype(kv_dtype);
  return model;
}

void add_parallel_flags(CLI::App& cmd, ParallelFlags& f, bool with_kv_dtype) {
  // --tp may already exist (kvsim latency had it first): keep that one.
  if (!cmd.get_option_no_throw("--tp")) {
    cmd.add_option("--tp", f.tp, "tensor parallel degree (figures per GPU)")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
  }
  cmd.add_option("--pp", f.pp, "pipeline parallel degree (figures per GPU of the heaviest stage)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd.add_option("--dp", f.dp,
                 "data parallel degree: replicas whose MoE layers share their experts (figures "
                 "per GPU of one replica)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd.add_flag("--ep", f.ep,
               "expert parallelism: the dp x tp GPUs hold whole experts (a MoE model only)");
  cmd.add_option("--weights-dtype", f.weights_dtype, "weight type of the linear layers")
      ->check(CLI::IsMember({"fp16", "bf16", "fp8", "int8", "int4", "mxfp4", "nvfp4"}));
  if (with_kv_dtype) {
    cmd.add_option("--kv-dtype", f.kv_dtype, "KV cache element type")
        ->check(CLI::IsMember({"fp16", "bf16", "fp8"}));
  }
}

int heaviest_stage(const ModelSpec& model, Parallelism par) {
  int best = 0;
  for (int s = 1; s < par.pipeline; ++s) {
    const int64_t kv = kv_bytes_per_token_on_gpu(model, par, s);
    const int64_t best_kv = kv_bytes_per_token_on_gpu(model, par, best);
    if (kv > best_kv || (kv == best_kv && weights_bytes_on_gpu(model, par, s) >
                                              weights_bytes_on_gpu(model, par, best))) {
      best = s;
    }
  }
  return best;
}

}  // namespace kvsim::cli
