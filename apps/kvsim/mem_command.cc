// `kvsim mem`: replays a trace through a KV store without timing (sim/engine/kv_replay.h) and
// prints the usage and waste of each store: the vLLM paper's Figure 2, measured.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/catalog.h"
#include "models/memory/gpu_memory_pool.h"
#include "sim/engine/kv_replay.h"
#include "apps/kvsim/commands.h"
#include "core/text_table.h"
#include "core/config_node.h"
#include "core/units.h"
#include "workloads/traces/trace_reader.h"

#include "apps/kvsim/parallel_flags.h"

namespace kvsim::cli {

namespace {

struct MemOptions {
  std::string trace;
  std::vector<std::string> stores = {"paged", "contiguous", "caching_allocator"};
  std::string model = "llama-3-8b";
  std::string gpu = "a100-sxm4-80gb";
  int64_t max_inflight = 64;
  std::optional<int64_t> max_requests;
  int64_t block_size = 16;
  bool prefix_caching = false;
  std::string reserve = "max_len";
  std::optional<int64_t> max_len;
  std::string fit = "first";
  std::string growth = "chunked";
  int64_t chunk_tokens = 256;
  ParallelFlags par;
  bool json = false;
};

// The `kv:` node the flags describe, so the store is built exactly as a scenario would build it.
std::string kv_yaml(const MemOptions& o, const std::string& store) {
  if (store == "paged") {
    return fmt::format("{{type: paged, block_size: {}, enable_prefix_caching: {}}}", o.block_size,
                       o.prefix_caching);
  }
  if (store == "contiguous") {
    std::string y = fmt::format("{{type: contiguous, reserve: {}, fit: {}", o.reserve, o.fit);
    if (o.max_len) y += fmt::format(", max_len: {}", *o.max_len);
    return y + "}";
  }
  return fmt::format("{{type: caching_allocator, growth: {}, chunk_tokens: {}}}", o.growth,
                     o.chunk_tokens);
}

std::string store_detail(const MemOptions& o, const std::string& store, const ModelSpec& m) {
  if (store == "paged") {
    return fmt::format("block {}{}", o.block_size, o.prefix_caching ? ", prefix caching" : "");
  }
  if (store == "contiguous") {
    const int64_t len = o.max_len ? *o.max_len : (m.max_position > 0 ? m.max_position : 2048);
    return o.reserve == "max_len" ? fmt::format("max_len {}, {} fit", len, o.fit)
                                  : fmt::format("{}, {} fit", o.reserve, o.fit);
  }
  return o.growth == "chunked" ? fmt::format("chunked {}", o.chunk_tokens) : o.growth;
}

std::vector<ReplayRequest> read_requests(const MemOptions& o) {
  TraceOptions t;
  t.path = o.trace;
  t.max_requests = o.max_requests;
  auto source = open_trace(t);
  std::vector<ReplayRequest> out;
  while (auto r = source->next()) {
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
  j["kv_capacity_bytes"] = kv_capacity;
  j["peak_kv_bytes"] = r.peak_kv_bytes;
  j["peak_live_bytes"] = r.peak_live_bytes;
  j["mean_kv_footprint_bytes"] = r.waste.mean_footprint_bytes;
  j["mean_live_bytes"] = r.waste.mean_live_bytes;
  j["usage_efficiency"] = r.waste.usage_efficiency;
  j["internal_waste_fraction"] = r.waste.internal_fraction;
  j["reservation_waste_fraction"] = r.waste.reservation_fraction;
  j["external_waste_fraction"] = r.waste.external_fraction;
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
  TextTable t({"store", "config", "done", "rejected", "alloc fail", "preempt", "peak held GiB",
               "mean footprint GiB", "token states %", "reservation %", "internal %", "external %"});
  int64_t budget_bytes = 0;
  for (const std::string& store : o.stores) {
    const ConfigNode node = ConfigNode::parse_string(kv_yaml(o, store), "kvsim mem --store " + store);
    GpuMemoryPool pool(model, gpu, node, pool_options);
    const int64_t kv_capacity = pool.kv().usage().capacity_bytes;
    if (store != "caching_allocator") budget_bytes = kv_capacity;
    ReplayOptions ro;
    ro.max_inflight = o.max_inflight;
    const ReplayResult r = replay_kv(pool.kv(), requests, ro);
    const std::string detail = store_detail(o, store, model);
    all.push_back(to_json(store, detail, r, kv_capacity));
    t.add_row({store, detail, with_commas(r.completed), with_commas(r.rejected),
               with_commas(r.alloc_failures), with_commas(r.preemptions),
               fmt::format("{:.2f}", to_gib(r.peak_kv_bytes)),
               fmt::format("{:.2f}", r.waste.mean_footprint_bytes / static_cast<double>(kGiB)),
               pct(r.waste.usage_efficiency), pct(r.waste.reservation_fraction),
               pct(r.waste.internal_fraction), pct(r.waste.external_fraction)});
  }
  if (o.json) {
    fmt::print("{}\n", all.size() == 1 ? all[0].dump(2) : all.dump(2));
    return;
  }
  fmt::print("trace {}: {} requests; model {} ({} bytes of KV per token) on {}; max {} in flight\n",
             o.trace, with_commas(static_cast<long long>(requests.size())), model.name,
             with_commas(share.kv_bytes_per_token()), gpu.name, o.max_inflight);
  if (!o.par.parallelism().single()) {
    fmt::print("per GPU at {}: {:.2f} GiB of weights, the KV of {} KV heads x {} layers\n",
               parallelism_text(o.par.parallelism()), to_gib(share.weights_bytes()),
               share.kv_heads, share.layers);
  }
  if (budget_bytes > 0) {
    fmt::print("preallocated KV space (gpu_memory_utilization 0.9): {:.2f} GiB; GiB = 2^30 bytes\n",
               to_gib(budget_bytes));
  }
  fmt::print("time-weighted over decode iterations; token states + reservation + internal + "
             "external = 100% of the KV footprint\n\n{}",
             t.render());
}

}  // namespace

void add_mem_command(CLI::App& app) {
  auto o = std::make_shared<MemOptions>();
  CLI::App* cmd = app.add_subcommand(
      "mem", "replay a trace through KV stores without timing; usage and waste by kind");
  cmd->add_option("--trace", o->trace, "trace file (normalized CSV, Azure CSV, Mooncake JSONL, ...)")
      ->required();
  cmd->add_option("--store", o->stores, "paged, contiguous, caching_allocator (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"paged", "contiguous", "caching_allocator"}))
      ->capture_default_str();
  cmd->add_option("--model", o->model, "catalog model name, or a model file: kvsim model .yaml or Hugging Face config.json")->capture_default_str();
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
  cmd->add_option("--reserve", o->reserve, "contiguous: max_len, prompt_plus_max_new, pow2, exact")
      ->check(CLI::IsMember({"max_len", "prompt_plus_max_new", "pow2", "exact"}))
      ->capture_default_str();
  cmd->add_option("--max-len", o->max_len, "contiguous: tokens reserved under max_len (default: "
                  "the model's max position)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--fit", o->fit, "contiguous: first or best")
      ->check(CLI::IsMember({"first", "best"}))
      ->capture_default_str();
  cmd->add_option("--growth", o->growth, "caching_allocator: preallocate, concat, chunked")
      ->check(CLI::IsMember({"preallocate", "concat", "chunked"}))
      ->capture_default_str();
  cmd->add_option("--chunk-tokens", o->chunk_tokens, "caching_allocator: chunked growth step")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  add_parallel_flags(*cmd, o->par, /*with_kv_dtype=*/true);
  cmd->add_flag("--json", o->json, "one JSON object (an array for several stores)");
  cmd->callback([o] { run_mem(*o); });
}

}  // namespace kvsim::cli
