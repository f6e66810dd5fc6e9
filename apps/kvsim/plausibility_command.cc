// `kvsim plausibility CLAIMS.csv`: each published latency claim next to the physical lower bound
// of the same work and kvsim's estimate, with a verdict and the arithmetic behind the bound.
#include <CLI/CLI.hpp>

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/catalog.h"
#include "models/latency/plausibility.h"
#include "apps/kvsim/commands.h"
#include "apps/kvsim/plot_data.h"
#include "core/text_table.h"
#include "core/data_path.h"

namespace kvsim::cli {

namespace {

struct PlausibilityOptions {
  std::string file;
  bool json = false;
  std::string plot;
};

// A time in ms or a throughput in tokens/s, as the claim's kind reads best.
std::string figure(const Claim& c, double v) {
  return c.throughput ? fmt::format("{:.1f} tok/s", v) : fmt::format("{:.1f} ms", v * 1e3);
}

std::string arithmetic(const ClaimCheck& r) {
  const Claim& c = r.claim;
  if (c.kind == ClaimKind::kDecode) {
    return fmt::format(
        "line {}: one decode step reads {:.3e} bytes -> >= {:.2f} ms at {:.0f} GB/s, so at most "
        "{:.1f} tok/s; {:.1f} tok/s needs {:.0f}% of that",
        c.line, r.bytes, r.memory_floor_s * 1e3, r.peak_bytes_per_s / 1e9, r.lower_bound, c.claimed,
        r.bound_fraction * 100);
  }
  return fmt::format(
      "line {}: prefill of {} tokens = {:.3e} FLOPs -> >= {:.1f} ms at {:.0f} TFLOP/s "
      "({:.3e} bytes -> >= {:.1f} ms at {:.0f} GB/s); kernel by kernel >= {:.1f} ms; "
      "{:.1f} ms implies {:.0f} TFLOP/s = {:.0f}% of peak",
      c.line, with_commas(c.seq_len * c.batch), r.flops, r.compute_floor_s * 1e3,
      r.peak_flops / 1e12, r.bytes, r.memory_floor_s * 1e3, r.peak_bytes_per_s / 1e9,
      r.lower_bound * 1e3, c.claimed * 1e3, r.implied_flops_per_s / 1e12,
      r.implied_flops_per_s / r.peak_flops * 100);
}

void plot_claims(const PlausibilityOptions& o, const std::vector<ClaimCheck>& checks) {
  nlohmann::ordered_json d;
  d["kind"] = "plausibility";
  d["kvsim_version"] = kvsim_version();
  d["file"] = std::filesystem::path(o.file).filename().string();
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const ClaimCheck& r : checks) {
    nlohmann::ordered_json j;
    j["line"] = r.claim.line;
    j["label"] = r.claim.label;
    j["metric"] = r.claim.metric;
    j["unit"] = r.claim.throughput ? "tokens/s" : "s";
    j["claimed"] = r.claim.claimed;
    j["lower_bound"] = r.lower_bound;
    j["estimate"] = r.estimate;
    j["verdict"] = std::string(verdict_name(r.verdict));
    arr.push_back(j);
  }
  d["claims"] = arr;
  plot_data("plausibility", d, o.plot, o.json);
}

void run_plausibility(const PlausibilityOptions& o) {
  if (!o.plot.empty()) check_figure_name(o.plot);
  const Catalog& catalog = Catalog::builtin();
  const std::vector<Claim> claims = read_claims(o.file, catalog);
  std::vector<ClaimCheck> checks;
  for (const Claim& c : claims) checks.push_back(check_claim(c, catalog));
  if (o.json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const ClaimCheck& r : checks) {
      const Claim& c = r.claim;
      nlohmann::ordered_json j;
      j["line"] = c.line;
      j["label"] = c.label;
      j["model"] = c.model;
      j["gpu"] = c.gpu;
      j["attention"] = std::string(attention_kind_name(c.attention));
      j["kv_heads"] = c.kv_heads > 0 ? c.kv_heads : catalog.model(c.model).kv_heads;
      j["block_size"] = c.block_tokens;
      j["seq_len"] = c.seq_len;
      j["batch"] = c.batch;
      j["metric"] = c.metric;
      j["unit"] = c.throughput ? "tokens/s" : "s";
      j["claimed"] = c.claimed;
      j["lower_bound"] = r.lower_bound;
      j["estimate"] = r.estimate;
      j["bound_fraction"] = r.bound_fraction;
      j["verdict"] = std::string(verdict_name(r.verdict));
      j["flops"] = r.flops;
      j["bytes"] = r.bytes;
      j["compute_floor_s"] = r.compute_floor_s;
      j["memory_floor_s"] = r.memory_floor_s;
      j["implied_flops_per_s"] = r.implied_flops_per_s;
      arr.push_back(j);
    }
    fmt::print("{}\n", arr.dump(2));
    if (!o.plot.empty()) plot_claims(o, checks);
    return;
  }
  fmt::print(
      "{}: {} claims. bound = fastest the GPU's peaks allow (efficiency 1.0, no "
      "overheads); estimate = kvsim with its default profile\n",
      o.file, checks.size());
  fmt::print(
      "impossible: faster than the bound; optimistic: more than {:.0f}x faster than the "
      "estimate; plausible: otherwise\n\n",
      kOptimisticFactor);
  TextTable t({"line", "claim", "KV heads", "seq_len", "metric", "claimed", "bound", "estimate",
               "needs % of bound", "verdict"});
  for (const ClaimCheck& r : checks) {
    const Claim& c = r.claim;
    t.add_row({std::to_string(c.line), c.label,
               std::to_string(c.kv_heads > 0 ? c.kv_heads : catalog.model(c.model).kv_heads),
               with_commas(c.seq_len), c.metric, figure(c, c.claimed), figure(c, r.lower_bound),
               figure(c, r.estimate), fmt::format("{:.0f}%", r.bound_fraction * 100),
               std::string(verdict_name(r.verdict))});
  }
  fmt::print("{}\narithmetic:\n", t.render());
  for (const ClaimCheck& r : checks) fmt::print("  {}\n", arithmetic(r));
  if (!o.plot.empty()) plot_claims(o, checks);
}

}  // namespace

void add_plausibility_command(CLI::App& app) {
  auto o = std::make_shared<PlausibilityOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plausibility",
      "Check published latency claims against physical bounds and kvsim's estimate");
  cmd->add_option("claims", o->file, "CSV of claims (see docs/latency.md)")->required();
  cmd->add_flag("--json", o->json, "one JSON array, an object per claim");
  cmd->add_option("--plot", o->plot,
                  "also draw each claim against kvsim's estimate and the physical bound into "
                  "FILE (.png/.svg/.pdf; data beside it as .json; needs matplotlib)");
  cmd->callback([o] { run_plausibility(*o); });
}

}  // namespace kvsim::cli
