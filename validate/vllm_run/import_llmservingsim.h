// `kvsim-validate import llmservingsim PERF_DIR -o DIR`: LLMServingSim's GPU-node profile of one
// model (`perf/<GPU>/<org>/<model>/<dtype>/`: kernel times measured inside vLLM, per op and token
// count) into a measure folder (measurements.csv + manifest.json, as `import vidur` writes), the
// profile fitted on its train half (DIR/profile.yaml), and the held-out error by op class and
// token-count bin (DIR/heldout.csv, DIR/heldout.json, a table on stdout). docs/fidelity.md.
//
// What each file becomes (per GPU of the tensor-parallel group `--tp`):
//   dense.csv      qkv_proj, o_proj, gate_up_proj, down_proj: GEMMs (m = tokens); embedding,
//                  layernorm, final_layernorm, rotary_emb, act_fn, qk_norm: elementwise traffic
//   attention.csv  prefill-only rows: causal flash attention (a chunk after kv_prefill cached
//                  tokens); decode-only rows: paged decode (n sequences of kv_decode tokens);
//                  mixed rows (one chunk and n decodes in one varlen kernel): held out whole,
//                  predicted as kvsim's engine charges them (the profile's flash tiles: the
//                  decodes inside the chunk's kernel, models/latency/flash_tiles.h)
//   per_sequence   lm_head: a GEMM (m = sequences, n = the GPU's vocabulary share); sampler:
//                  the profile's per-sequence overhead and its constant (a least-squares line)
//   skew.csv       decode batches of unequal contexts: held out, predicted from the context sum
//                  as kvsim does (kvsim's decode cost depends on the sum only)
//   moe.csv        a MoE model's fused experts by tokens and activated experts: the profile's
//                  routed_experts term, fitted on the even rows, held out on the odd ones
//                  (validate/vllm_run/moe_fit.h)
//
// The bundle's reading and cases: llmservingsim_bundle.h; the report: heldout_report.h; the
// measure folder: validate/import_manifest.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace kvsim::validate {

struct LlmservingsimImportOptions {
  std::filesystem::path input;  // perf/<GPU>/<org>/<model>/<dtype>/ (or one of its tpN/ folders)
  std::filesystem::path out_dir;
  std::string gpu;    // catalog GPU ("" = meta.yaml's gpu matched to a catalog display name)
  std::string model;  // catalog name or config.json ("" = meta.yaml's model in the catalog)
  int tp = 1;         // which tpN/ folder (ignored when `input` is a tpN/ folder)
  bool quiet = false;
};

// Returns the held-out MAPE over every held-out row. Throws InputError on bad input.
double run_import_llmservingsim(const LlmservingsimImportOptions& o);

}  // namespace kvsim::validate
