// `kvsim models` and `kvsim gpus`: list the shipped catalogs (a table, or --json for machines).
#include <CLI/CLI.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/kvsim/commands.h"
#include "core/text_table.h"
#include "core/units.h"
#include "models/catalog.h"
#include "models/json_fields.h"

namespace kvsim::cli {

namespace {

void list_models(bool json) {
  const auto& models = Catalog::builtin().models();
  if (json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& entry : models) arr.push_back(to_json(entry.second));
    fmt::print("{}\n", arr.dump(2));
    return;
  }
  TextTable t({"name", "attn", "layers", "heads", "kv_heads", "head_dim", "params (B)",
               "weights (GiB)", "KV bytes/token", "max_pos"});
  for (const auto& [name, m] : models) {
    t.add_row({name, m.attention_kind(), std::to_string(m.layers), std::to_string(m.heads),
               std::to_string(m.kv_heads), std::to_string(m.head_dim),
               fmt::format("{:.3f}", static_cast<double>(m.param_count()) / 1e9),
               fmt::format("{:.2f}", to_gib(m.weights_bytes())),
               with_commas(m.kv_bytes_per_token()), with_commas(m.max_position)});
  }
  fmt::print("{}", t.render());
}

void list_gpus(bool json) {
  const auto& gpus = Catalog::builtin().gpus();
  if (json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& entry : gpus) arr.push_back(to_json(entry.second));
    fmt::print("{}\n", arr.dump(2));
    return;
  }
  TextTable t({"name", "memory (GiB)", "memory (GB)", "HBM (GB/s)", "FP16 dense (TFLOP/s)", "SMs",
               "$/GPU-h"});
  for (const auto& [name, g] : gpus) {
    t.add_row({name, fmt::format("{:.2f}", to_gib(g.memory_bytes)),
               fmt::format("{:.2f}", to_gb(g.memory_bytes)),
               fmt::format("{:.0f}", g.hbm_bytes_per_s / 1e9),
               fmt::format("{:.1f}", g.fp16_flops / 1e12), std::to_string(g.sm_count),
               g.gpu_hour_usd > 0 ? fmt::format("{:.2f}", g.gpu_hour_usd) : "-"});
  }
  fmt::print("{}", t.render());
}

}  // namespace

void add_catalog_commands(CLI::App& app) {
  auto json_models = std::make_shared<bool>(false);
  auto* models = app.add_subcommand("models", "list the model catalog");
  models->add_flag("--json", *json_models, "machine-readable");
  models->callback([json_models] { list_models(*json_models); });

  auto json_gpus = std::make_shared<bool>(false);
  auto* gpus = app.add_subcommand("gpus", "list the GPU catalog");
  gpus->add_flag("--json", *json_gpus, "machine-readable");
  gpus->callback([json_gpus] { list_gpus(*json_gpus); });
}

}  // namespace kvsim::cli
