// `kvsim-validate import vidur FILE_OR_DIR -o DIR`: converts Vidur's profiling data (mlp.csv: the
// median GPU kernel time of every linear layer, norm, activation, rotary and residual add of one
// decoder layer, per token count and tensor-parallel degree) into a measure folder
// (measurements.csv + manifest.json), so calibrate and compare read it like kvsim's own runs.
// Each Vidur operation becomes one harness case that the latency model predicts with the same
// operation it costs in a forward pass (the mapping table is in docs/validate.md "Importing").
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "validate/commands.h"
#include "validate/import_manifest.h"

namespace kvsim::validate {

namespace {

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : line) {
    if (ch == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (ch != '\r') {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

// The Vidur operations kvsim models, in the order of a decoder layer, and how each becomes a case.
// GEMMs are (m = tokens, k, n) per GPU; elementwise kernels are a membw_copy whose 2 x bytes equal
// the kernel's HBM traffic, so the latency model costs them as elementwise traffic.
enum class Kind { kGemm, kTraffic };
struct VidurOp {
  std::string_view name;
  Kind kind;
};
constexpr VidurOp kOps[] = {
    {"emb", Kind::kTraffic},         {"input_layernorm", Kind::kTraffic},
    {"attn_pre_proj", Kind::kGemm},  {"attn_rope", Kind::kTraffic},
    {"attn_post_proj", Kind::kGemm}, {"post_attention_layernorm", Kind::kTraffic},
    {"mlp_up_proj", Kind::kGemm},    {"mlp_act", Kind::kTraffic},
    {"mlp_down_proj", Kind::kGemm},  {"add", Kind::kTraffic}};

struct Dims {
  int64_t heads, kv_heads, hidden, ffn, tp;
};

// (m, k, n) of a GEMM per GPU, or the HBM bytes of an elementwise kernel, for `tokens` rows.
KernelCase case_of(std::string_view op, int64_t tokens, const Dims& d) {
  const int64_t head_dim = d.hidden / d.heads;
  const int64_t q = d.heads / d.tp * head_dim;
  const int64_t kv = std::max<int64_t>(1, d.kv_heads / d.tp) * head_dim;
  const int64_t f = d.ffn / d.tp;
  KernelCase c;
  c.precision = kernels::Precision::kFp16;
  auto gemm = [&](int64_t k, int64_t n) {
    c.kind = KernelClass::kGemm;
    c.gemm = {.m = tokens, .n = n, .k = k};
  };
  auto traffic = [&](int64_t bytes) {
    c.kind = KernelClass::kMembwCopy;
    // A copy of `bytes` moves 2 x bytes; membw cases are whole KiB (under 0.1% off from 512
    // tokens up, and below a few thousand tokens the kernel floor dominates anyway).
    c.bytes = std::max<int64_t>(1, (bytes / 2 + 512) / 1024) * 1024;
  };
  constexpr int64_t e = 2;  // FP16
  if (op == "attn_pre_proj")
    gemm(d.hidden, q + 2 * kv);
  else if (op == "attn_post_proj")
    gemm(q, d.hidden);
  else if (op == "mlp_up_proj")
    gemm(d.hidden, 2 * f);
  else if (op == "mlp_down_proj")
    gemm(f, d.hidden);
  else if (op == "emb")
    traffic(2 * tokens * d.hidden * e);  // gather rows, write rows
  else if (op == "input_layernorm" || op == "post_attention_layernorm")
    traffic(2 * tokens * d.hidden * e);  // read + write
  else if (op == "attn_rope")
    traffic(2 * tokens * (q + kv) * e);  // Q and K in place
  else if (op == "mlp_act")
    traffic(3 * tokens * f * e);  // gate, up in; out
  else if (op == "add")
    traffic(3 * tokens * d.hidden * e);  // 2 in, 1 out
  return c;
}

std::string guess_gpu(const std::string& path) {
  std::string lower;
  for (char ch : path) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower.find("h100") != std::string::npos) return "h100-sxm";
  if (lower.find("a100") != std::string::npos) return "a100-sxm4-80gb";
  if (lower.find("a40") != std::string::npos) return "a40";
  if (lower.find("l40s") != std::string::npos) return "l40s";
  if (lower.find("h200") != std::string::npos) return "h200";
  return "";
}

}  // namespace

int run_import_vidur(const ImportOptions& o) {
  std::filesystem::path mlp = o.input;
  if (std::filesystem::is_directory(mlp)) mlp /= "mlp.csv";
  std::ifstream in(mlp);
  if (!in)
    throw InputError(fmt::format("{}: cannot open (expected Vidur's mlp.csv)", mlp.string()));
  const std::string gpu_name = o.gpu.empty() ? guess_gpu(mlp.string()) : o.gpu;
  if (gpu_name.empty()) {
    throw InputError(
        fmt::format("{}: cannot tell the GPU from the path; pass --gpu NAME", mlp.string()));
  }
  const GpuSpec gpu = Catalog::builtin().gpu(gpu_name);

  std::string line;
  if (!std::getline(in, line)) throw InputError(fmt::format("{}:1: empty file", mlp.string()));
  const std::vector<std::string> header = split_commas(line);
  auto col = [&](const std::string& name) -> size_t {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) {
      throw InputError(
          fmt::format("{}:1: no column '{}' (not a Vidur mlp.csv?)", mlp.string(), name));
    }
    return static_cast<size_t>(it - header.begin());
  };
  const size_t c_tokens = col("num_tokens"), c_tp = col("num_tensor_parallel_workers");
  const size_t c_heads = col("n_head"), c_kv = col("n_kv_head"), c_hidden = col("n_embd"),
               c_ffn = col("n_expanded_embd");
  // Duplicate (tokens) rows (overlapping grids) are averaged, each statistic separately.
  struct Acc {
    double min = 0, max = 0, median = 0;
    int n = 0;
  };
  std::map<std::pair<int64_t, std::string>, Acc> acc;
  std::set<int64_t> token_counts;
  std::optional<Dims> dims;
  int line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const std::vector<std::string> f = split_commas(line);
    const std::string where = fmt::format("{}:{}", mlp.string(), line_no);
    if (f.size() != header.size()) {
      throw InputError(
          fmt::format("{}: expected {} fields, got {}", where, header.size(), f.size()));
    }
    auto num = [&](size_t i) {
      try {
        size_t used = 0;
        const double v = std::stod(f[i], &used);
        if (used == f[i].size()) return v;
      } catch (const std::logic_error&) {
      }
      throw InputError(
          fmt::format("{}: column {}: expected a number, got \"{}\"", where, header[i], f[i]));
    };
    if (static_cast<int64_t>(num(c_tp)) != o.tp) continue;
    const Dims d{static_cast<int64_t>(num(c_heads)), static_cast<int64_t>(num(c_kv)),
                 static_cast<int64_t>(num(c_hidden)), static_cast<int64_t>(num(c_ffn)), o.tp};
    if (d.heads < 1 || d.kv_heads < 1 || d.hidden % d.heads != 0 || d.heads % d.tp != 0) {
      throw InputError(
          fmt::format("{}: model dims {} heads, {} KV heads, hidden {} cannot be split {} ways",
                      where, d.heads, d.kv_heads, d.hidden, d.tp));
    }
    if (dims && (dims->heads != d.heads || dims->hidden != d.hidden || dims->ffn != d.ffn)) {
      throw InputError(fmt::format("{}: a second model in one file (hidden {} vs {})", where,
                                   d.hidden, dims->hidden));
    }
    dims = d;
    const int64_t tokens = static_cast<int64_t>(num(c_tokens));
    if (tokens < 1)
      throw InputError(fmt::format("{}: num_tokens {}: expected >= 1", where, tokens));
    token_counts.insert(tokens);
    for (const VidurOp& op : kOps) {
      const std::string base = fmt::format("time_stats.{}.", op.name);
      Acc& a = acc[{tokens, std::string(op.name)}];
      a.min += num(col(base + "min"));
      a.max += num(col(base + "max"));
      a.median += num(col(base + "median"));
      a.n += 1;
    }
  }
  if (!dims) {
    throw InputError(
        fmt::format("{}: no rows with num_tensor_parallel_workers = {}", mlp.string(), o.tp));
  }
  // Held out: every other distinct token count (the 2nd, 4th, ...), so the test points interleave
  // the train points over the whole range.
  std::map<int64_t, std::string> split;
  size_t i = 0;
  for (int64_t t : token_counts) split[t] = i++ % 2 == 1 ? "test" : "train";

  std::vector<Measurement> rows;
  std::string ops_csv = "row,num_tokens,vidur_op,kvsim_case\n";
  for (int64_t t : token_counts) {
    for (const VidurOp& op : kOps) {
      const Acc& a = acc.at({t, std::string(op.name)});
      Measurement m;
      m.c = case_of(op.name, t, *dims);
      m.c.split = split[t];
      m.c.validate();
      m.reps = 20;  // Vidur's repetitions per point
      m.seconds = a.median / a.n * 1e-3;
      m.seconds_min = a.min / a.n * 1e-3;
      m.seconds_p10 = m.seconds_min;  // Vidur keeps min/max, not percentiles
      m.seconds_p90 = a.max / a.n * 1e-3;
      if (!(m.seconds > 0)) {
        m.reps = 0;
        m.skipped = "zero time in the source";
      }
      ops_csv += fmt::format("{},{},{},\"{}\"\n", rows.size(), t, op.name, m.c.describe());
      rows.push_back(m);
    }
  }
  const nlohmann::ordered_json source = {
      {"file", mlp.string()},
      {"format", "vidur mlp.csv"},
      {"tensor_parallel", o.tp},
      {"model",
       {{"n_head", dims->heads},
        {"n_kv_head", dims->kv_heads},
        {"n_embd", dims->hidden},
        {"n_expanded_embd", dims->ffn}}},
      {"timing", "median of 20 repetitions, GPU kernel time only (no launch gaps, no L2 flush)"},
      {"split", "every other distinct num_tokens is test"}};
  write_import_folder(o.out_dir, "kvsim-validate import vidur", source, gpu.display_name, gpu,
                      rows);
  write_file_atomic(o.out_dir / "vidur_ops.csv", ops_csv);
  const std::filesystem::path attn = mlp.parent_path() / "attention.csv";
  const bool has_attn = std::filesystem::exists(attn);
  if (!o.quiet) {
    fmt::print("import vidur: {} token counts x {} operations from {} (TP {}) on {}\nwrote {}{}\n",
               token_counts.size(), std::size(kOps), mlp.string(), o.tp, gpu.name,
               (o.out_dir / "measurements.csv").string(),
               has_attn ? fmt::format("{}: not imported (its columns are not mapped yet; "
                                      "docs/validate.md)\n",
                                      attn.string())
                        : "");
  }
  return static_cast<int>(rows.size());
}

}  // namespace kvsim::validate
