// `kvsim kv`: the KV-cache calculator (exact bytes, GB and GiB labelled, a risk level).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/catalog.h"
#include "models/kv_calculator.h"
#include "apps/kvsim/commands.h"
#include "models/json_fields.h"
#include "apps/kvsim/parallel_flags.h"
#include "apps/kvsim/plot_data.h"
#include "core/text_table.h"
#include "core/data_path.h"
#include "core/errors.h"
#include "core/units.h"

namespace kvsim::cli {

namespace {

struct KvOptions {
  std::string model = "seed-7b-mha";
  std::vector<int64_t> seqs = {2048, 4096, 8192, 16384, 32768};
  int64_t batch = 1;
  std::string gpu;
  std::optional<double> capacity_gb;
  std::optional<double> weights_gb;
  std::optional<int> kv_heads;
  std::string kv_dtype;
  ParallelFlags par;
  JsonPlotOptions out;
};

std::string gb_gib(int64_t bytes) { return fmt::format("{:.2f} / {:.2f}", to_gb(bytes), to_gib(bytes)); }

void print_human(const KvQuery& q, const std::vector<KvRow>& rows, const KvOptions& o) {
  const ModelSpec& m = q.model;
  if (!o.par.parallelism().single()) {
    fmt::print("per GPU at {}, the heaviest stage: {} query heads, weights {}\n",
               parallelism_text(o.par.parallelism()), m.heads, dtype_name(m.weight_dtype));
  }
  if (m.mla()) {
    // One latent and one rotary key per token and layer, the same on every TP rank.
    fmt::print("model {} (MLA: {} layers x (latent {} + rotary {}), KV {}): {} bytes of KV per "
               "token\n",
               m.name, m.layers, m.kv_lora_rank, m.qk_rope_head_dim, dtype_name(m.kv_dtype),
               with_commas(m.kv_bytes_per_token()));
  } else {
    fmt::print("model {} ({}: {} layers x {} KV heads x head dim {}, KV {}): {} bytes of KV per token\n",
               m.name, m.attention_kind(), m.layers, m.kv_heads, m.head_dim, dtype_name(m.kv_dtype),
               with_commas(m.kv_bytes_per_token()));
  }
  if (q.capacity_bytes) {
    fmt::print("capacity {} bytes ({:.2f} GB = {:.2f} GiB), weights {} bytes ({:.2f} GB = {:.2f} GiB)\n",
               with_commas(*q.capacity_bytes), to_gb(*q.capacity_bytes), to_gib(*q.capacity_bytes),
               with_commas(q.weights_bytes), to_gb(q.weights_bytes), to_gib(q.weights_bytes));
  }
  fmt::print("GB = 1e9 bytes, GiB = 2^30 bytes; columns show GB / GiB\n\n");
  TextTable t({"seq_len", "KV per request", fmt::format("KV for batch of {}", q.batch),
               "left after weights+KV", "risk"});
  for (const KvRow& r : rows) {
    t.add_row({with_commas(r.seq_len), gb_gib(r.kv_bytes_per_request), gb_gib(r.kv_bytes_total),
               r.remaining_bytes ? gb_gib(*r.remaining_bytes) : "-",
               std::string(risk_name(r.risk))});
  }
  fmt::print("{}", t.render());
  if (q.capacity_bytes) {
    fmt::print("\nrisk: critical < 0 left; warning < {:.0f}% of capacity left; controlled < {:.0f}%; "
               "safe otherwise\n",
               kRiskControlledFraction * 100, kRiskSafeFraction * 100);
  }
}

// The GQA variant of the figure: the model's own KV heads when it is GQA, else the divisor of
// its query heads nearest heads/4 (a common group size); 0 when no divisor lies strictly between
// MQA (1) and MHA (heads).
int gqa_kv_heads(const ModelSpec& m) {
  if (m.kv_heads > 1 && m.kv_heads < m.heads) return m.kv_heads;
  int best = 0;
  for (int d = 2; d < m.heads; ++d) {
    if (m.heads % d == 0 && (best == 0 || std::abs(d * 4 - m.heads) < std::abs(best * 4 - m.heads)))
      best = d;
  }
  return best;
}

// KV bytes of the batch at each sequence length for MHA, GQA and MQA versions of q.model.
nlohmann::ordered_json kv_plot_data(const KvQuery& q, const KvOptions& o) {
  std::vector<int64_t> seqs = q.seq_lens;
  std::sort(seqs.begin(), seqs.end());
  seqs.erase(std::unique(seqs.begin(), seqs.end()), seqs.end());
  nlohmann::ordered_json d;
  d["kind"] = "kv";
  d["kvsim_version"] = kvsim_version();
  d["model"] = q.model.name;
  d["heads"] = q.model.heads;
  d["kv_dtype"] = std::string(dtype_name(q.model.kv_dtype));
  d["batch"] = q.batch;
  if (!o.par.parallelism().single()) {  // only then, so single-GPU plot data keeps its bytes
    d["gpus"] = o.par.parallelism().gpus();
    d["tp"] = o.par.tp;
    d["pp"] = o.par.pp;
  }
  d["gpu"] = o.gpu;
  d["capacity_bytes"] = or_null(q.capacity_bytes);
  d["weights_bytes"] = q.weights_bytes;
  d["seq_lens"] = seqs;
  nlohmann::ordered_json variants = nlohmann::ordered_json::array();
  const std::pair<const char*, int> kinds[] = {
      {"MHA", q.model.heads}, {"GQA", gqa_kv_heads(q.model)}, {"MQA", 1}};
  int last = -1;
  for (const auto& [name, heads] : kinds) {
    if (heads <= 0 || heads == last) continue;  // a 1-head model has one variant, not three
    last = heads;
    KvQuery v = q;
    v.model.kv_heads = heads;
    v.seq_lens = seqs;
    nlohmann::ordered_json bytes = nlohmann::ordered_json::array();
    for (const KvRow& r : kv_table(v)) bytes.push_back(r.kv_bytes_total);
    variants.push_back({{"name", name}, {"kv_heads", heads}, {"kv_bytes", bytes}});
  }
  d["variants"] = variants;
  return d;
}

void run_kv(const KvOptions& o) {
  o.out.check();
  const Catalog& catalog = Catalog::builtin();
  KvQuery q;
  q.model = o.par.apply_dtypes(load_model(o.model, catalog));
  if (o.kv_heads) {
    if (q.model.heads % *o.kv_heads != 0) {
      throw InputError(fmt::format("--kv-heads {}: expected a divisor of the model's {} query heads",
                                   *o.kv_heads, q.model.heads));
    }
    q.model.kv_heads = *o.kv_heads;
  }
  if (!o.kv_dtype.empty()) q.model.kv_dtype = parse_dtype(o.kv_dtype);
  // Per GPU: the heaviest stage's share (the whole model on one GPU).
  const Parallelism par = o.par.parallelism();
  if (!par.single()) {
    check_parallelism(q.model, par);
    q.model = gpu_share(q.model, par, heaviest_stage(q.model, par));
  }
  q.seq_lens = o.seqs;
  q.batch = o.batch;
  if (!o.gpu.empty()) q.capacity_bytes = catalog.gpu(o.gpu).memory_bytes;
  if (o.capacity_gb) q.capacity_bytes = gb_to_bytes(*o.capacity_gb);
  q.weights_bytes = o.weights_gb ? gb_to_bytes(*o.weights_gb) : q.model.weights_bytes();
  const auto rows = kv_table(q);
  if (o.out.json) {
    fmt::print("{}\n", to_json_array(rows).dump(2));
  } else {
    print_human(q, rows, o);
  }
  o.out.plot_if_asked("kv", [&] { return kv_plot_data(q, o); });
}

}  // namespace

void add_kv_command(CLI::App& app) {
  auto o = std::make_shared<KvOptions>();
  CLI::App* cmd = app.add_subcommand("kv", "KV-cache bytes per request and per batch, and what is left");
  cmd->add_option("--model", o->model, "catalog model name (kvsim models), or a model file: kvsim model .yaml or Hugging Face config.json")->capture_default_str();
  cmd->add_option("--seq", o->seqs, "sequence lengths, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000'000}))
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "concurrent requests")
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}))
      ->capture_default_str();
  auto* gpu = cmd->add_option("--gpu", o->gpu, "catalog GPU name: capacity from the catalog (kvsim gpus)");
  cmd->add_option("--capacity-gb", o->capacity_gb, "capacity in decimal GB (instead of --gpu)")
      ->check(CLI::Range(0.001, 1e6))
      ->excludes(gpu);
  cmd->add_option("--weights-gb", o->weights_gb, "weights in decimal GB (default: the model's own)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--kv-heads", o->kv_heads, "override the model's KV heads (GQA/MQA what-if)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--kv-dtype", o->kv_dtype, "KV element type")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "fp8", "int8"}));
  add_parallel_flags(*cmd, o->par, /*with_kv_dtype=*/false);
  add_json_plot_options(*cmd, o->out, "one JSON array, exact integer bytes",
                        "KV bytes against sequence length for MHA/GQA/MQA");
  cmd->callback([o] { run_kv(*o); });
}

}  // namespace kvsim::cli
