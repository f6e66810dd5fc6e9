// `kvsim mem`: replays a trace through a KV store without timing (sim/engine/kv_replay.h) and
// prints the usage and waste of each store: the vLLM paper's Figure 2, measured.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/kvsim/commands.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "core/text_table.h"
#include "core/units.h"
#include "models/catalog.h"
#include "models/memory/gpu_memory_pool.h"
#include "sim/engine/kv_replay.h"
#include "workloads/traces/trace_reader.h"
#include "workloads/workload.h"

#include "apps/kvsim/parallel_flags.h"

namespace kvsim::cli {

namespace {

struct MemOptions {
  std::string trace;
  std::string workload;  // a YAML file with `seed:` and an open-loop `workload:` node
  std::vector<std::string> stores = {"paged", "contiguous", "caching_allocator"};
  std::string model = "llama-3-8b";
  std::string gpu = "a100-sxm4-80gb";
  int64_t max_inflight = 64;
  std::optional<int64_t> max_requests;
  int64_t block_size = 16;
  bool prefix_caching = false;
  std::vector<std::string> reserves = {"max_len"};  // one contiguous row each
  std::optional<int64_t> kv_tokens;                 // paged and contiguous: the KV space in tokens
  std::string fractions = "footprint";              // or kv_space (the vLLM paper's Figure 2)
  std::optional<int64_t> max_len;
  std::string fit = "first";
  std::string growth = "chunked";
  int64_t chunk_tokens = 256;
  ParallelFlags par;
  bool json = false;
};

// One row of the table: a store, and for the contiguous store the reservation policy.
struct StoreRow {
  std::string store;
  std::string reserve;
};

std::vector<StoreRow> store_rows(const MemOptions& o) {
  std::vector<StoreRow> rows;
  for (const std::string& store : o.stores) {
    if (store != "contiguous") {
      rows.push_back({store, ""});
      continue;
    }
    for (const std::string& reserve : o.reserves) rows.push_back({store, reserve});
  }
  return rows;
}

// The `kv:` node the flags describe, so the store is built exactly as a scenario would build it.
std::string kv_yaml(const MemOptions& o, const StoreRow& row) {
  const std::string& store = row.store;
  if (store == "paged") {
    std::string y = fmt::format("{{type: paged, block_size: {}, enable_prefix_caching: {}",
                                o.block_size, o.prefix_caching);
    if (o.kv_tokens) y += fmt::format(", num_blocks: {}", *o.kv_tokens / o.block_size);
    return y + "}";
  }
  if (store == "contiguous") {
    std::string y = fmt::format("{{type: contiguous, reserve: {}, fit: {}", row.reserve, o.fit);
    if (o.max_len) y += fmt::format(", max_len: {}", *o.max_len);
    if (o.kv_tokens) y += fmt::format(", num_tokens: {}", *o.kv_tokens);
    return y + "}";
  }
  return fmt::format("{{type: caching_allocator, growth: {}, chunk_tokens: {}}}", o.growth,
                     o.chunk_tokens);
}

std::string store_detail(const MemOptions& o, const StoreRow& row, const ModelSpec& m) {
  const std::string& store = row.store;
  if (store == "paged") {
    return fmt::format("block {}{}", o.block_size, o.prefix_caching ? ", prefix caching" : "");
  }
  if (store == "contiguous") {
    const int64_t len = o.max_len ? *o.max_len : (m.max_position > 0 ? m.max_position : 2048);
    return row.reserve == "max_len" ? fmt::format("max_len {}, {} fit", len, o.fit)
                                    : fmt::format("{}, {} fit", row.reserve, o.fit);
  }
  return o.growth == "chunked" ? fmt::format("chunked {}", o.chunk_tokens) : o.growth;
}

// The trace's requests, or those the workload file generates (arrival times are ignored: the
// replay is untimed and admits in order).
std::vector<ReplayRequest> read_requests(const MemOptions& o) {
  std::unique_ptr<WorkloadSource> source;
  if (!o.workload.empty()) {
    // A file with the keys a scenario uses for them: `seed:` and an open-loop `workload:`.
    const ConfigNode file = ConfigNode::parse_file(o.workload);
    const auto seed = static_cast<uint64_t>(file.get<int64_t>("seed", 0, {.min = 0}));
    const ConfigNode node = file.child("workload");
    if (!node.has("arrivals")) {
      node.fail(
          "kvsim mem --workload takes an open-loop workload (arrivals, prompt_tokens, "
          "output_tokens, max_requests); give a trace with --trace");
    }
    source = make_workload(node, seed).source;
    file.reject_unknown_keys();
  } else {
    TraceOptions t;
    t.path = o.trace;
    t.max_requests = o.max_requests;
    source = open_trace(t);
  }
  std::vector<ReplayRequest> out;
  while (auto r = source->next()) {
    if (o.max_requests && static_cast<int64_t>(out.size()) >= *o.max_requests) break;
    ReplayRequest q;
    q.prompt_tokens = r->prompt_tokens;
    q.output_tokens = r->output_tokens;
    q.prefix_hashes = std::move(r->prefix_hashes);
    q.hash_block_tokens = r->hash_block_tokens;
    out.push_back(std::move(q));
  }
  return out;
}

nlohmann::ordered_json to_json(const std::string& store, const std::string& detail,
                               const ReplayResult& r, int64_t kv_capacity) {
  nlohmann::ordered_json j;
  j["store"] = store;
  j["config"] = detail;
  j["requests"] = r.requests;
  j["completed"] = r.completed;
  j["rejected"] = r.rejected;
  j["alloc_failures"] = r.alloc_failures;
  j["oom_capacity"] = r.oom_capacity;
  j["oom_fragmentation"] = r.oom_fragmentation;
  j["oom_too_long"] = r.oom_too_long;
  j["preemptions"] = r.preemptions;
  j["iterations"] = r.iterations;
  j["peak_inflight"] = r.peak_inflight;
  j["kv_capacity_bytes"] = kv_capacity;
  j["peak_kv_bytes"] = r.peak_kv_bytes;
  j["peak_live_bytes"] = r.peak_live_bytes;
  j["mean_kv_footprint_bytes"] = r.waste.mean_footprint_bytes;
  j["mean_live_bytes"] = r.waste.mean_live_bytes;
  j["usage_efficiency"] = r.waste.usage_efficiency;
  j["internal_waste_fraction"] = r.waste.internal_fraction;
  j["reservation_waste_fraction"] = r.waste.reservation_fraction;
  j["external_waste_fraction"] = r.waste.external_fraction;
  // The vLLM paper's Figure 2 view: shares of the whole KV space (ReplayResult::of_kv_space).
  j["kv_space"] = {{"token_states", r.of_kv_space.usage_efficiency},
                   {"reservation", r.of_kv_space.reservation_fraction},
                   {"internal", r.of_kv_space.internal_fraction},
                   {"external_and_other", r.of_kv_space.external_fraction}};
  return j;
}

std::string pct(double f) { return fmt::format("{:.1f}", 100.0 * f); }

void run_mem(const MemOptions& o) {
  const Catalog& catalog = Catalog::builtin();
  const ModelSpec model = o.par.apply_dtypes(load_model(o.model, catalog));
  const GpuSpec& gpu = catalog.gpu(o.gpu);
  // One GPU's pool: with --tp/--pp, the share of the stage with room for the fewest tokens.
  const PoolOptions pool_options{.parallelism = o.par.parallelism()};
  const ModelSpec share = GpuMemoryPool::sizing_share(model, gpu, pool_options);
  const std::vector<ReplayRequest> requests = read_requests(o);
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  const bool of_space = o.fractions == "kv_space";
  TextTable t({"store", "config", "done", "rejected", "alloc fail", "preempt", "peak held GiB",
               "mean footprint GiB", "token states %", "reservation %", "internal %",
               of_space ? "external & other %" : "external %"});
  int64_t budget_bytes = 0;
  for (const StoreRow& row : store_rows(o)) {
    const std::string& store = row.store;
    if (o.kv_tokens && store == "caching_allocator") {
      throw InputError(
          "--kv-tokens sizes the paged and contiguous stores; the caching allocator "
          "grows with its requests (drop it from --store)");
    }
    const ConfigNode node = ConfigNode::parse_string(kv_yaml(o, row), "kvsim mem --store " + store);
    GpuMemoryPool pool(model, gpu, node, pool_options);
    const int64_t kv_capacity = pool.kv().usage().capacity_bytes;
    if (store != "caching_allocator") budget_bytes = kv_capacity;
    ReplayOptions ro;
    ro.max_inflight = o.max_inflight;
    const ReplayResult r = replay_kv(pool.kv(), requests, ro);
    const std::string detail = store_detail(o, row, model);
    all.push_back(to_json(store, detail, r, kv_capacity));
    const KvWasteSummary& w = of_space ? r.of_kv_space : r.waste;
    t.add_row({store, detail, with_commas(r.completed), with_commas(r.rejected),
               with_commas(r.alloc_failures), with_commas(r.preemptions),
               fmt::format("{:.2f}", to_gib(r.peak_kv_bytes)),
               fmt::format("{:.2f}", r.waste.mean_footprint_bytes / static_cast<double>(kGiB)),
               pct(w.usage_efficiency), pct(w.reservation_fraction), pct(w.internal_fraction),
               pct(w.external_fraction)});
  }
  if (o.json) {
    fmt::print("{}\n", all.size() == 1 ? all[0].dump(2) : all.dump(2));
    return;
  }
  std::string lengths;  // generated lengths are not the file's: say what they came out as
  if (!o.workload.empty() && !requests.empty()) {
    double prompt = 0, output = 0;
    for (const ReplayRequest& q : requests) {
      prompt += static_cast<double>(q.prompt_tokens);
      output += static_cast<double>(q.output_tokens);
    }
    const auto n = static_cast<double>(requests.size());
    lengths =
        fmt::format(" (mean prompt {:.1f}, mean output {:.1f} tokens)", prompt / n, output / n);
  }
  fmt::print("{} {}: {} requests{}; model {} ({} bytes of KV per token) on {}; max {} in flight\n",
             o.workload.empty() ? "trace" : "workload", o.workload.empty() ? o.trace : o.workload,
             with_commas(static_cast<long long>(requests.size())), lengths, model.name,
             with_commas(share.kv_bytes_per_token()), gpu.name, o.max_inflight);
  if (!o.par.parallelism().single()) {
    fmt::print("per GPU at {}: {:.2f} GiB of weights, the KV of {} KV heads x {} layers\n",
               parallelism_text(o.par.parallelism()), to_gib(share.weights_bytes()), share.kv_heads,
               share.layers);
  }
  if (budget_bytes > 0 && o.kv_tokens) {
    fmt::print("preallocated KV space ({} tokens): {:.2f} GiB; GiB = 2^30 bytes\n",
               with_commas(*o.kv_tokens), to_gib(budget_bytes));
  } else if (budget_bytes > 0) {
    fmt::print("preallocated KV space (gpu_memory_utilization 0.9): {:.2f} GiB; GiB = 2^30 bytes\n",
               to_gib(budget_bytes));
  }
  if (of_space) {
    fmt::print(
        "time-weighted over decode iterations; token states + reservation + internal + "
        "external & other = 100% of the KV space (the vLLM paper's Figure 2: allocator "
        "rounding and unused space count as external & other)\n\n{}",
        t.render());
    return;
  }
  fmt::print(
      "time-weighted over decode iterations; token states + reservation + internal + "
      "external = 100% of the KV footprint\n\n{}",
      t.render());
}

}  // namespace

void add_mem_command(CLI::App& app) {
  auto o = std::make_shared<MemOptions>();
  CLI::App* cmd = app.add_subcommand(
      "mem", "replay a trace through KV stores without timing; usage and waste by kind");
  auto* trace = cmd->add_option("--trace", o->trace,
                                "trace file (normalized CSV, Azure CSV, Mooncake JSONL, ...)");
  auto* workload = cmd->add_option("--workload", o->workload,
                                   "instead of --trace: a YAML file with `seed:` and an open-loop "
                                   "`workload:` (as in a scenario)");
  trace->excludes(workload);
  workload->excludes(trace);
  cmd->add_option("--store", o->stores, "paged, contiguous, caching_allocator (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"paged", "contiguous", "caching_allocator"}))
      ->capture_default_str();
  cmd->add_option(
         "--model", o->model,
         "catalog model name, or a model file: kvsim model .yaml or Hugging Face config.json")
      ->capture_default_str();
  cmd->add_option("--gpu", o->gpu, "catalog GPU name")->capture_default_str();
  cmd->add_option("--max-inflight", o->max_inflight, "concurrency limit")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}))
      ->capture_default_str();
  cmd->add_option("--max-requests", o->max_requests, "replay only the first N requests")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000}));
  cmd->add_option("--block-size", o->block_size, "paged: tokens per block")
      ->check(CLI::Range(int64_t{1}, int64_t{1 << 20}))
      ->capture_default_str();
  cmd->add_flag("--prefix-caching", o->prefix_caching, "paged: share prefix blocks by hash");
  cmd->add_option("--reserve", o->reserves,
                  "contiguous: max_len, prompt_plus_max_new, pow2, prompt_plus_pow2_new, exact "
                  "(comma-separated: one row each)")
      ->delimiter(',')
      ->check(CLI::IsMember(
          {"max_len", "prompt_plus_max_new", "pow2", "prompt_plus_pow2_new", "exact"}))
      ->capture_default_str();
  cmd->add_option(
         "--kv-tokens", o->kv_tokens,
         "paged and contiguous: the KV space in tokens instead of gpu_memory_utilization 0.9 "
         "(paged: kv-tokens / block-size blocks)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--fractions", o->fractions,
                  "footprint: shares of the KV footprint; kv_space: shares of the whole KV space, "
                  "allocator rounding and unused space as external (the vLLM paper's Figure 2)")
      ->check(CLI::IsMember({"footprint", "kv_space"}))
      ->capture_default_str();
  cmd->add_option("--max-len", o->max_len,
                  "contiguous: tokens reserved under max_len (default: "
                  "the model's max position)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--fit", o->fit, "contiguous: first, best or buddy")
      ->check(CLI::IsMember({"first", "best", "buddy"}))
      ->capture_default_str();
  cmd->add_option("--growth", o->growth, "caching_allocator: preallocate, concat, chunked")
      ->check(CLI::IsMember({"preallocate", "concat", "chunked"}))
      ->capture_default_str();
  cmd->add_option("--chunk-tokens", o->chunk_tokens, "caching_allocator: chunked growth step")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  add_parallel_flags(*cmd, o->par, /*with_kv_dtype=*/true);
  cmd->add_flag("--json", o->json, "one JSON object (an array for several stores)");
  cmd->callback([o, trace, workload] {
    if (trace->count() + workload->count() != 1) {
      throw CLI::RequiredError("--trace or --workload");
    }
    run_mem(*o);
  });
}

}  // namespace kvsim::cli
