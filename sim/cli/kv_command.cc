// `kvsim kv`: the KV-cache calculator (exact bytes, GB and GiB labelled, a risk level).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/catalog.h"
#include "models/kv_calculator.h"
#include "sim/cli/commands.h"
#include "sim/cli/text_table.h"
#include "sim/core/errors.h"
#include "sim/core/units.h"

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
  bool json = false;
};

std::string gb_gib(int64_t bytes) { return fmt::format("{:.2f} / {:.2f}", to_gb(bytes), to_gib(bytes)); }

void print_human(const KvQuery& q, const std::vector<KvRow>& rows) {
  const ModelSpec& m = q.model;
  fmt::print("model {} ({}: {} layers x {} KV heads x head dim {}, KV {}): {} bytes of KV per token\n",
             m.name, m.attention_kind(), m.layers, m.kv_heads, m.head_dim, dtype_name(m.kv_dtype),
             with_commas(m.kv_bytes_per_token()));
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

void print_json(const std::vector<KvRow>& rows) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const KvRow& r : rows) {
    nlohmann::ordered_json o;
    o["seq_len"] = r.seq_len;
    o["batch"] = r.batch;
    o["kv_bytes_per_request"] = r.kv_bytes_per_request;
    o["kv_bytes_total"] = r.kv_bytes_total;
    o["remaining_bytes"] = r.remaining_bytes ? nlohmann::ordered_json(*r.remaining_bytes)
                                             : nlohmann::ordered_json(nullptr);
    o["risk"] = std::string(risk_name(r.risk));
    arr.push_back(o);
  }
  fmt::print("{}\n", arr.dump(2));
}

void run_kv(const KvOptions& o) {
  const Catalog& catalog = Catalog::builtin();
  KvQuery q;
  q.model = catalog.model(o.model);
  if (o.kv_heads) {
    if (q.model.heads % *o.kv_heads != 0) {
      throw InputError(fmt::format("--kv-heads {}: expected a divisor of the model's {} query heads",
                                   *o.kv_heads, q.model.heads));
    }
    q.model.kv_heads = *o.kv_heads;
  }
  if (!o.kv_dtype.empty()) q.model.kv_dtype = parse_dtype(o.kv_dtype);
  q.seq_lens = o.seqs;
  q.batch = o.batch;
  if (!o.gpu.empty()) q.capacity_bytes = catalog.gpu(o.gpu).memory_bytes;
  if (o.capacity_gb) q.capacity_bytes = gb_to_bytes(*o.capacity_gb);
  q.weights_bytes = o.weights_gb ? gb_to_bytes(*o.weights_gb) : q.model.weights_bytes();
  const auto rows = kv_table(q);
  if (o.json) {
    print_json(rows);
  } else {
    print_human(q, rows);
  }
}

}  // namespace

void add_kv_command(CLI::App& app) {
  auto o = std::make_shared<KvOptions>();
  CLI::App* cmd = app.add_subcommand("kv", "KV-cache bytes per request and per batch, and what is left");
  cmd->add_option("--model", o->model, "catalog model name (kvsim models)")->capture_default_str();
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
  cmd->add_flag("--json", o->json, "one JSON array, exact integer bytes");
  cmd->callback([o] { run_kv(*o); });
}

}  // namespace kvsim::cli
