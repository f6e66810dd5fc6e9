// `kvsim kv`: the KV-cache calculator (exact bytes, GB and GiB labelled, a risk level).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/kvsim/commands.h"
#include "apps/kvsim/parallel_flags.h"
#include "apps/kvsim/plot_data.h"
#include "core/data_path.h"
#include "core/errors.h"
#include "core/text_table.h"
#include "core/units.h"
#include "models/catalog.h"
#include "models/json_fields.h"
#include "models/kv_calculator.h"
#include "models/memory/kv_groups.h"
#include "sim/run/arguments.h"

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
  int64_t block_size = 16;  // the paged store's block: what a sliding window holds beyond itself
  ParallelFlags par;
  JsonPlotOptions out;
};

// KV tokens a sequence of `seq_len` tokens holds under `m`'s sliding window in vLLM's paged
// store: blocks wholly before the window are freed as it grows (SlidingWindowManager.
// remove_skipped_blocks, docs/memory.md "Sliding-window attention"), so it holds at most the
// window's blocks plus the one being filled: min(seq_len, (ceil(window / block) + 1) x block).
// Without a window, seq_len.
int64_t held_tokens(const ModelSpec& m, int64_t seq_len, int64_t block) {
  if (!m.sliding_window) return seq_len;
  const int64_t window_blocks = (*m.sliding_window + block - 1) / block;
  return std::min(seq_len, (window_blocks + 1) * block);
}

// The KV bytes actually held under the window, per request and for the batch (the rows'
// full-attention figures when the model has none). Checked like kv_table's: held <= full.
struct HeldKv {
  int64_t per_request = 0, total = 0;
};
HeldKv held_kv(const KvQuery& q, const KvRow& r, int64_t block) {
  const int64_t tokens = held_tokens(q.model, r.seq_len, block);
  // held / full = tokens / seq_len exactly, and held <= full, so no overflow.
  const int64_t per = q.model.kv_bytes_per_token() * tokens;
  return {per, per * r.batch};
}

std::string gb_gib(int64_t bytes) {
  return fmt::format("{:.2f} / {:.2f}", to_gb(bytes), to_gib(bytes));
}

// Bytes of pool blocks a request of `seq_len` tokens holds in group g of a hybrid model's layout
// (the blocks before a local group's window or chunk freed), block bytes padding included.
int64_t group_held_bytes(const KvGroupLayout& l, size_t g, int64_t seq_len, int64_t block) {
  return kv_group_blocks_held(l.groups[g], seq_len, block) * l.block_bytes(block);
}

// A hybrid model's KV cache groups as vLLM's hybrid manager forms them (kv_groups.h), and what a
// request holds in each at every sequence length.
void print_groups(const KvQuery& q, const std::vector<KvRow>& rows, int64_t block) {
  const KvGroupLayout l = kv_group_layout(q.model);
  fmt::print(
      "\nKV cache groups (vLLM's hybrid KV cache manager): {} groups of {} layers ({} "
      "padding), one pool of blocks of {} layers x {} tokens = {} bytes; a request holds "
      "per group (bytes):\n",
      l.groups.size(), l.group_size, l.padding_layers(), l.group_size, block,
      with_commas(l.block_bytes(block)));
  std::vector<std::string> header = {"group", "attention", "layers"};
  for (const KvRow& r : rows) header.push_back(with_commas(r.seq_len));
  TextTable t(header);
  std::vector<int64_t> total(rows.size(), 0);
  for (size_t g = 0; g < l.groups.size(); ++g) {
    std::vector<std::string> row = {std::to_string(g), kv_group_name(l.groups[g]),
                                    std::to_string(l.groups[g].layers.size())};
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t b = group_held_bytes(l, g, rows[i].seq_len, block);
      total[i] += b;
      row.push_back(with_commas(b));
    }
    t.add_row(row);
  }
  std::vector<std::string> row = {"all", "", std::to_string(q.model.layers)};
  for (int64_t b : total) row.push_back(with_commas(b));
  t.add_row(row);
  fmt::print("{}", t.render());
}

// `whole`: the model before it is split over GPUs (its attention kind is the model's, whatever
// one GPU's share of its KV heads is).
void print_human(const KvQuery& q, const std::vector<KvRow>& rows, const KvOptions& o,
                 const ModelSpec& whole) {
  const ModelSpec& m = q.model;
  const bool per_gpu = !o.par.parallelism().single();
  if (per_gpu) {
    fmt::print("per GPU at {}, the heaviest stage: {} query heads, weights {}\n",
               parallelism_text(o.par.parallelism()), m.heads, dtype_name(m.weight_dtype));
  }
  if (m.mla()) {
    // One latent and one rotary key per token and layer, the same on every TP rank.
    fmt::print(
        "model {} (MLA: {} layers x (latent {} + rotary {}), KV {}): {} bytes of KV per "
        "token\n",
        m.name, m.layers, m.kv_lora_rank, m.qk_rope_head_dim, dtype_name(m.kv_dtype),
        with_commas(m.kv_bytes_per_token()));
  } else {
    const std::string heads = fmt::format("{} KV head{}{}", m.kv_heads, m.kv_heads == 1 ? "" : "s",
                                          per_gpu ? " per GPU" : "");
    fmt::print("model {} ({}: {} layers x {} x head dim {}, KV {}): {} bytes of KV per token\n",
               m.name, whole.attention_kind(), m.layers, heads, m.head_dim, dtype_name(m.kv_dtype),
               with_commas(m.kv_bytes_per_token()));
  }
  const bool window = m.sliding_window.has_value();
  if (window) {
    fmt::print(
        "sliding window of {} tokens: a request holds at most the window plus one block "
        "({} blocks of {} tokens: {} tokens); full attention would hold every token\n",
        with_commas(*m.sliding_window), (*m.sliding_window + o.block_size - 1) / o.block_size + 1,
        o.block_size,
        with_commas(held_tokens(m, std::numeric_limits<int64_t>::max(), o.block_size)));
  }
  if (q.capacity_bytes) {
    fmt::print(
        "capacity {} bytes ({:.2f} GB = {:.2f} GiB), weights {} bytes ({:.2f} GB = {:.2f} GiB)\n",
        with_commas(*q.capacity_bytes), to_gb(*q.capacity_bytes), to_gib(*q.capacity_bytes),
        with_commas(q.weights_bytes), to_gb(q.weights_bytes), to_gib(q.weights_bytes));
  }
  if (m.hybrid()) {
    fmt::print(
        "hybrid local/global attention: a request holds what vLLM's KV cache groups hold "
        "(the table after this one), not every token's KV ({} bytes a token)\n",
        with_commas(m.kv_bytes_per_token()));
  }
  fmt::print("GB = 1e9 bytes, GiB = 2^30 bytes; columns show GB / GiB\n\n");
  std::vector<std::string> header = {"seq_len", "KV per request",
                                     fmt::format("KV for batch of {}", q.batch)};
  if (window) {
    header = {"seq_len", "KV per request (full attention)", "held under the window",
              fmt::format("KV for batch of {} (full)", q.batch), "held for the batch"};
  }
  header.insert(header.end(), {"left after weights+KV", "risk"});
  TextTable t(header);
  for (const KvRow& r : rows) {
    std::vector<std::string> row = {with_commas(r.seq_len), gb_gib(r.kv_bytes_per_request)};
    if (window) row.push_back(gb_gib(held_kv(q, r, o.block_size).per_request));
    row.push_back(gb_gib(r.kv_bytes_total));
    if (window) row.push_back(gb_gib(held_kv(q, r, o.block_size).total));
    row.push_back(r.remaining_bytes ? gb_gib(*r.remaining_bytes) : "-");
    row.emplace_back(risk_name(r.risk));
    t.add_row(row);
  }
  fmt::print("{}", t.render());
  if (m.hybrid()) print_groups(q, rows, o.block_size);
  if (q.capacity_bytes) {
    fmt::print(
        "\nrisk: critical < 0 left; warning < {:.0f}% of capacity left; controlled < {:.0f}%; "
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
      throw InputError(
          fmt::format("--kv-heads {}: expected a divisor of the model's {} query heads",
                      *o.kv_heads, q.model.heads));
    }
    q.model.kv_heads = *o.kv_heads;
  }
  if (!o.kv_dtype.empty()) q.model.kv_dtype = parse_dtype(o.kv_dtype);
  // Per GPU: the heaviest stage's share (the whole model on one GPU).
  const ModelSpec whole = q.model;
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
  q.block_tokens = o.block_size;
  const auto rows = kv_table(q);
  if (o.out.json) {
    nlohmann::ordered_json arr = to_json_array(rows);
    if (q.model.sliding_window) {  // only then, so other models' JSON keeps its bytes
      for (size_t i = 0; i < rows.size(); ++i) {
        const HeldKv h = held_kv(q, rows[i], o.block_size);
        arr[i]["sliding_window"] = *q.model.sliding_window;
        arr[i]["block_size"] = o.block_size;
        arr[i]["window_kv_bytes_per_request"] = h.per_request;
        arr[i]["window_kv_bytes_total"] = h.total;
      }
    }
    if (q.model.hybrid()) {  // only then, so other models' JSON keeps its bytes
      const KvGroupLayout l = kv_group_layout(q.model);
      for (size_t i = 0; i < rows.size(); ++i) {
        nlohmann::ordered_json groups = nlohmann::ordered_json::array();
        for (size_t g = 0; g < l.groups.size(); ++g) {
          groups.push_back(
              {{"attention", kv_group_name(l.groups[g])},
               {"layers", l.groups[g].layers.size()},
               {"held_bytes_per_request", group_held_bytes(l, g, rows[i].seq_len, o.block_size)}});
        }
        arr[i]["block_size"] = o.block_size;
        arr[i]["group_size"] = l.group_size;
        arr[i]["groups"] = groups;
        // kv_bytes_per_request is the groups' sum; what every token's KV would take beside it.
        arr[i]["every_token_kv_bytes_per_request"] = q.model.kv_bytes_per_token() * rows[i].seq_len;
      }
    }
    fmt::print("{}\n", arr.dump(2));
  } else {
    print_human(q, rows, o, whole);
  }
  o.out.plot_if_asked("kv", [&] { return kv_plot_data(q, o); });
}

}  // namespace

void add_kv_command(CLI::App& app) {
  auto o = std::make_shared<KvOptions>();
  CLI::App* cmd =
      app.add_subcommand("kv", "KV-cache bytes per request and per batch, and what is left");
  cmd->add_option("--model", o->model,
                  "catalog model name (kvsim models), or a model file: kvsim model .yaml or "
                  "Hugging Face config.json")
      ->capture_default_str();
  cmd->add_option("--seq", o->seqs, "sequence lengths, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(args::kKvSeq.min, args::kKvSeq.max))
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "concurrent requests")
      ->check(CLI::Range(args::kKvBatch.min, args::kKvBatch.max))
      ->capture_default_str();
  auto* gpu =
      cmd->add_option("--gpu", o->gpu, "catalog GPU name: capacity from the catalog (kvsim gpus)");
  cmd->add_option("--capacity-gb", o->capacity_gb, "capacity in decimal GB (instead of --gpu)")
      ->check(CLI::Range(args::kCapacityGb.min, args::kCapacityGb.max))
      ->excludes(gpu);
  cmd->add_option("--weights-gb", o->weights_gb, "weights in decimal GB (default: the model's own)")
      ->check(CLI::Range(args::kWeightsGb.min, args::kWeightsGb.max));
  cmd->add_option("--kv-heads", o->kv_heads, "override the model's KV heads (GQA/MQA what-if)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option(
         "--block-size", o->block_size,
         "paged KV block in tokens: a sliding-window model holds its window plus one block")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}))
      ->capture_default_str();
  cmd->add_option("--kv-dtype", o->kv_dtype, "KV element type")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "fp8", "int8"}));
  add_parallel_flags(*cmd, o->par, /*with_kv_dtype=*/false);
  add_json_plot_options(*cmd, o->out, "one JSON array, exact integer bytes",
                        "KV bytes against sequence length for MHA/GQA/MQA");
  cmd->callback([o] { run_kv(*o); });
}

}  // namespace kvsim::cli
