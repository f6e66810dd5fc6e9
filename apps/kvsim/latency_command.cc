// `kvsim latency`: prefill time, time to first token and decode time per token of a model on a
// GPU, next to the physical lower bound of each, with the per-operation breakdown on --verbose.
#include <CLI/CLI.hpp>

#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "apps/kvsim/commands.h"
#include "apps/kvsim/parallel_flags.h"
#include "apps/kvsim/plot_data.h"
#include "core/data_path.h"
#include "core/errors.h"
#include "core/text_table.h"
#include "models/catalog.h"
#include "models/json_fields.h"
#include "models/latency/latency_model.h"
#include "sim/run/arguments.h"

namespace kvsim::cli {

namespace {

struct LatencyOptions {
  std::string model = "seed-7b-mha";
  std::string gpu = "a100-sxm4-80gb";
  std::string attention = "flash";
  std::vector<int64_t> seqs = {4096, 16384, 32768};
  std::optional<int> kv_heads;
  std::vector<int64_t> batches = {1};
  int block_size = 0;
  ParallelFlags par;
  std::string profile;
  bool verbose = false;
  JsonPlotOptions out;
};

std::string ms(double s) { return fmt::format("{:.1f}", s * 1e3); }

void print_breakdown(const char* title, const IterationCost& est, const IterationCost& bound) {
  fmt::print("\n  {}: {:.3e} FLOPs, {:.3e} bytes\n", title, est.flops, est.bytes);
  TextTable t({"operation", "class", "GFLOP", "GB", "ms", "bound by", "ms at peak"});
  for (size_t i = 0; i < est.ops.size(); ++i) {
    const OpCost& o = est.ops[i];
    // Both breakdowns list the same operations in the same order.
    const double peak_s = i < bound.ops.size() ? bound.ops[i].seconds : 0.0;
    t.add_row({std::string(o.name), std::string(op_class_name(o.op_class)),
               fmt::format("{:.1f}", o.flops / 1e9), fmt::format("{:.3f}", o.bytes / 1e9),
               fmt::format("{:.3f}", o.seconds * 1e3), std::string(bound_name(o.bound)),
               fmt::format("{:.3f}", peak_s * 1e3)});
  }
  t.add_row({"engine step overhead", "-", "0.0", "0.000",
             fmt::format("{:.3f}", est.overhead_seconds * 1e3), "-", "0.000"});
  fmt::print("{}", t.render());
  for (const OpCost& o : est.ops) {
    if (o.comm.source == CommSource::kNone) continue;
    fmt::print("  {}: {}{}, {} B x {} calls, {:.2f} us a call ({})\n", o.name,
               o.name == "allreduce" ? fmt::format("{}, ", path_name(o.comm.path)) : "",
               o.comm.graph ? "CUDA graph" : "eager",
               with_commas(std::llround(o.comm.message_bytes)),
               with_commas(std::llround(o.comm.calls)), o.seconds / o.comm.calls * 1e6,
               comm_source_name(o.comm.source));
  }
}

// "1" for one batch size, "1, 8" for several.
std::string batch_list(const std::vector<int64_t>& batches) {
  return fmt::format("{}", fmt::join(batches, ", "));
}

void print_human(const LatencyModel& lm, const LatencyOptions& o,
                 const std::vector<SequenceLatency>& rows) {
  const ModelSpec& m = lm.model();
  const GpuSpec& g = lm.gpu();
  // One batch size keeps the one-row-per-seq_len table; several add a batch column.
  const bool many = o.batches.size() > 1;
  fmt::print("model {} ({}: {} layers, {} query / {} KV heads, head dim {}, {}), batch {}\n",
             m.name, m.attention_kind(), m.layers, m.heads, m.kv_heads, m.head_dim,
             dtype_name(m.weight_dtype), batch_list(o.batches));
  fmt::print(
      "GPU {} ({:.1f} TFLOP/s dense FP16, {:.0f} GB/s), tensor parallel {}{}{}, attention {}, "
      "KV {}\n",
      g.name, g.fp16_flops / 1e12, g.hbm_bytes_per_s / 1e9, lm.tensor_parallel(),
      lm.pipeline_parallel() > 1
          ? fmt::format(", pipeline parallel {} (stages in turn)", lm.pipeline_parallel())
          : std::string(),
      o.par.dp > 1 || o.par.ep
          ? fmt::format(", data parallel {}{} (one replica's batch; the others alike)", o.par.dp,
                        o.par.ep ? " with expert parallelism" : "")
          : std::string(),
      attention_kind_name(lm.attention()),
      o.block_size > 0 ? fmt::format("paged ({}-token blocks)", o.block_size) : "contiguous");
  fmt::print("profile {} ({})\n", lm.profile().name, lm.profile().source);
  fmt::print("bound = the same operations at peak FLOP/s and bandwidth, no overheads\n\n");
  std::vector<std::string> head = {"seq_len", "prefill ms",   "bound",
                                   "TTFT ms", "bound",        "decode ms/token",
                                   "bound",   "decode tok/s", "max tok/s"};
  if (many) head.insert(head.begin() + 1, "batch");
  TextTable t(head);
  for (const SequenceLatency& s : rows) {
    std::vector<std::string> row = {with_commas(s.seq_len),
                                    ms(s.prefill_s),
                                    ms(s.prefill_lower_bound_s),
                                    ms(s.ttft_s),
                                    ms(s.ttft_lower_bound_s),
                                    fmt::format("{:.2f}", s.decode_step_s * 1e3),
                                    fmt::format("{:.2f}", s.decode_step_lower_bound_s * 1e3),
                                    fmt::format("{:.1f}", s.decode_tokens_per_s),
                                    fmt::format("{:.1f}", s.decode_tokens_per_s_upper_bound)};
    if (many) row.insert(row.begin() + 1, with_commas(s.batch));
    t.add_row(row);
  }
  fmt::print("{}", t.render());
  if (!o.verbose) return;
  for (const SequenceLatency& s : rows) {
    fmt::print("\nseq_len {}{}:", with_commas(s.seq_len),
               many ? fmt::format(", batch {}", s.batch) : std::string());
    print_breakdown("prefill", s.prefill, s.prefill_bound);
    print_breakdown(fmt::format("decode step (context {})", s.seq_len + 1).c_str(), s.decode,
                    s.decode_bound);
  }
}

void run_latency(const LatencyOptions& o) {
  o.out.check();
  const Catalog& catalog = Catalog::builtin();
  ModelSpec model = o.par.apply_dtypes(load_model(o.model, catalog));
  if (o.kv_heads) {
    if (model.heads % *o.kv_heads != 0) {
      throw InputError(
          fmt::format("--kv-heads {}: expected a divisor of the model's {} query heads",
                      *o.kv_heads, model.heads));
    }
    model.kv_heads = *o.kv_heads;
  }
  const GpuSpec& gpu = catalog.gpu(o.gpu);
  Profile profile = o.profile.empty() ? default_profile(gpu) : load_profile(o.profile);
  if (!profile.gpu.empty() && profile.gpu != gpu.name) {
    throw InputError(fmt::format("{}: profile '{}' describes GPU '{}', not '{}'", o.profile,
                                 profile.name, profile.gpu, gpu.name));
  }
  const LatencyModel lm(model, gpu, profile, parse_attention_kind(o.attention),
                        o.par.parallelism());
  std::vector<SequenceLatency> rows;
  for (int64_t s : o.seqs) {
    for (int64_t b : o.batches) rows.push_back(sequence_latency(lm, s, b, o.block_size));
  }
  if (o.out.json) {
    fmt::print("{}\n", to_json_array(rows, o.verbose).dump(2));
  } else {
    print_human(lm, o, rows);
  }
  o.out.plot_if_asked("latency", [&] {
    nlohmann::ordered_json d;
    d["kind"] = "latency";
    d["kvsim_version"] = kvsim_version();
    d["model"] = model.name;
    d["kv_heads"] = model.kv_heads;
    d["gpu"] = gpu.name;
    d["attention"] = std::string(attention_kind_name(lm.attention()));
    // A number for one batch size (as before), a list for several.
    if (o.batches.size() == 1) {
      d["batch"] = o.batches.front();
    } else {
      d["batch"] = o.batches;
    }
    d["block_size"] = o.block_size;
    d["tp"] = o.par.tp;
    if (o.par.pp > 1) d["pp"] = o.par.pp;
    if (o.par.dp > 1) d["dp"] = o.par.dp;
    if (o.par.ep) d["ep"] = true;
    d["profile"] = lm.profile().name;
    d["rows"] = to_json_array(rows, false);
    return d;
  });
}

}  // namespace

void add_latency_command(CLI::App& app) {
  auto o = std::make_shared<LatencyOptions>();
  CLI::App* cmd = app.add_subcommand(
      "latency", "Prefill, TTFT and decode time of a model on a GPU, with physical lower bounds");
  cmd->add_option("--model", o->model,
                  "catalog model name (kvsim models), or a model file: kvsim model .yaml or "
                  "Hugging Face config.json")
      ->capture_default_str();
  cmd->add_option("--gpu", o->gpu, "catalog GPU name (kvsim gpus)")->capture_default_str();
  cmd->add_option("--attention", o->attention, "prefill attention implementation")
      ->check(CLI::IsMember({"native", "flash"}))
      ->capture_default_str();
  cmd->add_option("--seq", o->seqs, "prompt lengths, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(args::kLatencySeq.min, args::kLatencySeq.max))
      ->capture_default_str();
  cmd->add_option("--kv-heads", o->kv_heads, "override the model's KV heads (GQA/MQA what-if)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--batch", o->batches,
                  "identical requests processed together; a comma-separated list gives a row per "
                  "(seq_len, batch)")
      ->delimiter(',')
      ->check(CLI::Range(args::kLatencyBatch.min, args::kLatencyBatch.max))
      ->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "paged KV block size in tokens (0: contiguous)")
      ->check(CLI::Range(args::kBlockSize.min, args::kBlockSize.max))
      ->capture_default_str();
  cmd->add_option("--tp", o->par.tp, "tensor parallel degree")
      ->check(CLI::Range(args::kTensorParallel.min, args::kTensorParallel.max))
      ->capture_default_str();
  add_parallel_flags(*cmd, o->par, /*with_kv_dtype=*/true);
  cmd->add_option("--profile", o->profile, "latency profile YAML (default: built-in defaults)");
  cmd->add_flag("--verbose", o->verbose, "per-operation breakdown");
  add_json_plot_options(*cmd, o->out, "one JSON array, an object per (sequence length, batch)",
                        "prefill and decode time against the bound by sequence length");
  cmd->callback([o] { run_latency(*o); });
}

}  // namespace kvsim::cli
