#include "validate/vllm_run/llmservingsim_bundle.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "core/config_node.h"
#include "core/csv_line.h"
#include "core/echo_text.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "models/latency/costing.h"
#include "models/latency/latency_model.h"
#include "models/parallelism.h"

namespace kvsim::validate {

namespace {
constexpr auto kBf16 = kernels::Precision::kBf16;
constexpr double kAct = 2;  // bytes per activation element (BF16)

// An elementwise kernel as a copy whose 2 x bytes equal its traffic (as `import vidur`), with its
// CTAs and each thread's serial dependent loads for the profile's latency terms.
KernelCase traffic(double bytes, double ctas = 0, double serial_loads = 0) {
  KernelCase c;
  c.ctas = ctas;
  c.serial_loads = serial_loads;
  c.kind = KernelClass::kMembwCopy;
  c.precision = kBf16;
  c.bytes = std::max<int64_t>(1, (static_cast<int64_t>(bytes) / 2 + 512) / 1024) * 1024;
  return c;
}
}  // namespace

size_t BundleCsv::col(const std::string& name) const {
  const auto it = std::find(header.begin(), header.end(), name);
  if (it == header.end())
    throw InputError(fmt::format("{}:1: no column '{}'", path.string(), name));
  return static_cast<size_t>(it - header.begin());
}

double BundleCsv::num(size_t row, size_t c) const {
  const std::string& s = rows[row][c];
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size() && std::isfinite(v)) return v;
  } catch (const std::logic_error&) {
  }
  throw InputError(fmt::format("{}:{}: column {}: expected a number, got \"{}\"", path.string(),
                               lines[row], header[c], echo_text(s)));
}

int64_t BundleCsv::count(size_t row, size_t c, int64_t min) const {
  constexpr double kMax = 2147483647.0;
  const double v = num(row, c);
  if (!(v >= static_cast<double>(min) && v <= kMax && v == std::floor(v))) {
    throw InputError(fmt::format("{}:{}: column {}: expected a whole count in [{}, {}], got \"{}\"",
                                 path.string(), lines[row], header[c], min, 2147483647,
                                 echo_text(rows[row][c])));
  }
  return static_cast<int64_t>(v);
}

BundleCsv read_bundle_csv(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot open", path.string()));
  BundleCsv c;
  c.path = path;
  std::string line;
  if (!std::getline(in, line) || !split_csv_line(line, c.header)) {
    throw InputError(fmt::format("{}:1: empty file or bad header", path.string()));
  }
  std::vector<std::string> f;
  int n = 1;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line == "\r") continue;
    if (!split_csv_line(line, f) || f.size() != c.header.size()) {
      throw InputError(fmt::format("{}:{}: expected {} fields", path.string(), n, c.header.size()));
    }
    c.rows.push_back(f);
    c.lines.push_back(n);
  }
  return c;
}

BundleMeta read_bundle_meta(const std::filesystem::path& file) {
  const ConfigNode root = ConfigNode::parse_file(file);
  BundleMeta m;
  m.gpu = root.get<std::string>("gpu", "");
  m.model = root.get<std::string>("model", "");
  m.vllm_version = root.get<std::string>("vllm_version", "");
  if (auto e = root.optional_child("engine_effective")) {
    m.block_size = e->get<int>("block_size", 16, {.min = 1, .max = 4096});
  }
  return m;
}

std::string catalog_gpu_for(const std::string& display) {
  for (const auto& [key, g] : Catalog::builtin().gpus()) {
    if (g.display_name == display) return key;
  }
  return "";
}

BundleDims bundle_dims(const ModelSpec& m, int tp) {
  const ModelSpec g = gpu_share(m, Parallelism{.tensor = tp}, 0);
  return {m.hidden,
          int64_t{g.heads} * m.head_dim,
          int64_t{g.kv_heads} * m.head_dim,
          g.ffn,
          g.vocab,
          g.heads,
          g.kv_heads,
          m.head_dim,
          (int64_t{m.heads} + m.kv_heads) * m.head_dim};
}

KernelCase gemm_case(int64_t m, int64_t k, int64_t n) {
  KernelCase c;
  c.kind = KernelClass::kGemm;
  c.precision = kBf16;
  c.gemm = {.m = m, .n = n, .k = k};
  return c;
}

KernelCase flash_case(const BundleDims& d, int64_t chunk, int64_t cached) {
  KernelCase c;
  c.kind = KernelClass::kFlash;
  c.precision = kBf16;
  c.attn = {.batch = 1,
            .heads = d.heads,
            .kv_heads = d.kv_heads,
            .seq_q = chunk,
            .seq_kv = cached + chunk,
            .head_dim = d.head_dim,
            .causal = true};
  return c;
}

KernelCase decode_case(const BundleDims& d, int64_t n, int64_t context, int64_t block) {
  KernelCase c;
  c.kind = KernelClass::kPagedDecode;
  c.precision = kBf16;
  c.paged = {.batch = n,
             .heads = d.heads,
             .kv_heads = d.kv_heads,
             .head_dim = d.head_dim,
             .context = context,
             .block_size = block};
  return c;
}

// Elementwise traffic as vLLM's kernels move it: rotary and the Q/K norm read and write Q and K,
// SiLU x up reads gate and up and writes one, the embedding gathers rows and writes them. The
// final norm is fused_add_rms_norm (LlamaModel.forward calls norm(hidden_states, residual):
// reads x and the residual, writes both, 4 rows). The bundle's one-layer model runs two norms a
// layer under the name `layernorm`: input_layernorm, a plain rms_norm in the first layer (no
// residual yet: reads and writes x, 2 rows), and post_attention_layernorm, fused (4 rows); its
// row is read as their mean, 3 rows (measured, it runs faster than final_layernorm at
// 1,536 and 2,048 tokens on the RTX PRO 6000 Llama-3.1-8B bundle: 1.21x and 1.25x, near 4 / 3).
std::optional<KernelCase> dense_case(const std::string& op, int64_t t, const BundleDims& d) {
  const double T = static_cast<double>(t);
  if (op == "qkv_proj") return gemm_case(t, d.hidden, d.q + 2 * d.kv);
  if (op == "o_proj") return gemm_case(t, d.q, d.hidden);
  if (op == "gate_up_proj") return gemm_case(t, d.hidden, 2 * d.ffn);
  if (op == "down_proj") return gemm_case(t, d.ffn, d.hidden);
  if (op == "embedding") {  // PyTorch's small-index gather loops each thread over the indices
    return traffic(2 * T * d.hidden * kAct, 0, T <= kIndexSelectSmallIndices ? T : 0);
  }
  if (op == "layernorm") return traffic(3 * T * d.hidden * kAct);
  if (op == "final_layernorm") return traffic(4 * T * d.hidden * kAct);
  if (op == "rotary_emb") return traffic(2 * T * (d.q + d.kv) * kAct);
  if (op == "qk_norm") {  // vLLM's rms_norm: one CTA per head row of Q and K
    return traffic(2 * T * d.qk_norm_width * kAct, T * (d.qk_norm_width / d.head_dim));
  }
  if (op == "act_fn") return traffic(3 * T * d.ffn * kAct);
  return std::nullopt;
}

double attention_seconds(const BundleDims& d, const GpuSpec& gpu, const Profile& p, int64_t pc,
                         int64_t kp, int64_t nd, int64_t kd, int block) {
  ModelSpec m;
  m.name = "attention";
  m.layers = 1;
  m.heads = static_cast<int>(d.heads);
  m.kv_heads = static_cast<int>(d.kv_heads);
  m.head_dim = static_cast<int>(d.head_dim);
  m.hidden = static_cast<int>(d.heads * d.head_dim);
  m.ffn = 1;
  m.vocab = 1;
  m.weight_dtype = m.kv_dtype = DType::kBf16;
  const LatencyModel lm(m, gpu, p, AttentionKind::kFlash);
  BatchShape b;
  if (pc > 0) b.prefill.push_back(PrefillChunk{pc, kp, true});
  b.decode.assign(static_cast<size_t>(nd), DecodeSeq{kd});
  b.block_tokens = block;
  double s = 0;
  for (const OpCost& o : lm.iteration(b).ops) {
    if (o.name == "attention_prefill" || o.name == "attention_decode") s += o.seconds;
  }
  return s;
}

}  // namespace kvsim::validate
