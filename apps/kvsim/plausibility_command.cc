// `kvsim plausibility CLAIMS.csv`: each published latency claim next to the physical lower bound
// of the same work and kvsim's estimate, with a verdict and the arithmetic behind the bound.
#include <CLI/CLI.hpp>

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/kvsim/commands.h"
#include "apps/kvsim/plot_data.h"
#include "core/data_path.h"
#include "core/text_table.h"
#include "models/catalog.h"
#include "models/json_fields.h"
#include "models/latency/plausibility.h"

namespace kvsim::cli {

namespace {

struct PlausibilityOptions {
  std::string file;
  JsonPlotOptions out;
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

// The claim's KV heads, or its model's when the claim leaves them out.
int kv_heads(const Claim& c, const Catalog& catalog) {
  return c.kv_heads > 0 ? c.kv_heads : catalog.model(c.model).kv_heads;
}

nlohmann::ordered_json claims_json(const std::vector<ClaimCheck>& checks, const Catalog& catalog) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const ClaimCheck& r : checks) arr.push_back(to_json(r, kv_heads(r.claim, catalog)));
  return arr;
}

// What the figure needs of each claim: the --json fields it draws.
nlohmann::ordered_json plot_data_of(const PlausibilityOptions& o,
                                    const nlohmann::ordered_json& claims) {
  nlohmann::ordered_json d;
  d["kind"] = "plausibility";
  d["kvsim_version"] = kvsim_version();
  d["file"] = std::filesystem::path(o.file).filename().string();
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& c : claims) {
    arr.push_back(pick(
        c, {"line", "label", "metric", "unit", "claimed", "lower_bound", "estimate", "verdict"}));
  }
  d["claims"] = arr;
  return d;
}

void print_human(const PlausibilityOptions& o, const std::vector<ClaimCheck>& checks,
                 const Catalog& catalog) {
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
    t.add_row({std::to_string(c.line), c.label, std::to_string(kv_heads(c, catalog)),
               with_commas(c.seq_len), c.metric, figure(c, c.claimed), figure(c, r.lower_bound),
               figure(c, r.estimate), fmt::format("{:.0f}%", r.bound_fraction * 100),
               std::string(verdict_name(r.verdict))});
  }
  fmt::print("{}\narithmetic:\n", t.render());
  for (const ClaimCheck& r : checks) fmt::print("  {}\n", arithmetic(r));
}

void run_plausibility(const PlausibilityOptions& o) {
  o.out.check();
  const Catalog& catalog = Catalog::builtin();
  const std::vector<Claim> claims = read_claims(o.file, catalog);
  std::vector<ClaimCheck> checks;
  for (const Claim& c : claims) checks.push_back(check_claim(c, catalog));
  const nlohmann::ordered_json all = claims_json(checks, catalog);
  if (o.out.json) {
    fmt::print("{}\n", all.dump(2));
  } else {
    print_human(o, checks, catalog);
  }
  o.out.plot_if_asked("plausibility", [&] { return plot_data_of(o, all); });
}

}  // namespace

void add_plausibility_command(CLI::App& app) {
  auto o = std::make_shared<PlausibilityOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plausibility",
      "Check published latency claims against physical bounds and kvsim's estimate");
  cmd->add_option("claims", o->file, "CSV of claims (see docs/latency.md)")->required();
  add_json_plot_options(*cmd, o->out, "one JSON array, an object per claim",
                        "each claim against kvsim's estimate and the physical bound");
  cmd->callback([o] { run_plausibility(*o); });
}

}  // namespace kvsim::cli
