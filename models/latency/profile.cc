#include "models/latency/profile.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "core/config_node.h"
#include "core/errors.h"
#include "models/gpu_spec.h"

namespace kvsim {

namespace {

constexpr std::array<std::string_view, kNumOpClasses> kClassNames = {
    "gemm", "attention_native", "attention_flash", "attention_decode", "elementwise", "allreduce"};
constexpr std::array<std::string_view, 4> kAxisNames = {"tokens", "seq_len", "batch", "block_size"};

// Which axis a table of each class may use: the ones that keep decode time affine in the total
// context (decode tables cannot depend on a single sequence's context).
bool axis_allowed(OpClass c, TableAxis a) {
  switch (c) {
    case OpClass::kGemm:
    case OpClass::kElementwise:
    case OpClass::kAllReduce: return a == TableAxis::kTokens;
    case OpClass::kAttentionNative:
    case OpClass::kAttentionFlash: return a == TableAxis::kSeqLen;
    case OpClass::kAttentionDecode: return a == TableAxis::kBatch || a == TableAxis::kBlockSize;
  }
  return false;
}

std::string_view metric_name(TableMetric m) {
  return m == TableMetric::kComputeEfficiency ? "compute_efficiency" : "memory_efficiency";
}

const Bounds kEfficiency{.min = 0.0, .max = 1.0, .min_exclusive = true};
const Bounds kMicros{.min = 0.0, .max = 1e7};
const Bounds kTokens{.min = 0.0, .max = 1e9};

// A time given in microseconds at `key`, in seconds (`seconds` when absent).
double micros_at(const ConfigNode& n, const char* key, double seconds) {
  return n.get<double>(key, seconds * 1e6, kMicros) * 1e-6;
}

void read_class(const ConfigNode& n, ClassParams& c) {
  if (!n.is_map()) n.fail_expected("a map of class parameters");
  c.compute_efficiency = n.get<double>("compute_efficiency", c.compute_efficiency, kEfficiency);
  c.memory_efficiency = n.get<double>("memory_efficiency", c.memory_efficiency, kEfficiency);
  c.launch_overhead_s = micros_at(n, "launch_overhead_us", c.launch_overhead_s);
  c.source = n.get<std::string>("source", c.source);
}

EfficiencyTable read_table(const ConfigNode& n) {
  if (!n.is_map()) n.fail_expected("a table (a map with class, metric, axis, points)");
  EfficiencyTable t;
  t.op_class =
      parse_op_class(n.get_enum("class", {"gemm", "attention_native", "attention_flash",
                                          "attention_decode", "elementwise", "allreduce"}));
  t.metric =
      n.get_enum("metric", {"compute_efficiency", "memory_efficiency"}) == "compute_efficiency"
          ? TableMetric::kComputeEfficiency
          : TableMetric::kMemoryEfficiency;
  const std::string axis = n.get_enum("axis", {"tokens", "seq_len", "batch", "block_size"});
  t.axis = static_cast<TableAxis>(std::find(kAxisNames.begin(), kAxisNames.end(), axis) -
                                  kAxisNames.begin());
  if (!axis_allowed(t.op_class, t.axis)) {
    n.child("axis").fail(
        fmt::format("class {} cannot be tabulated over '{}'", op_class_name(t.op_class), axis));
  }
  const ConfigNode pts = n.child("points");
  if (!pts.is_sequence() || pts.size() == 0) pts.fail_expected("a non-empty list of [x, y] pairs");
  for (size_t i = 0; i < pts.size(); ++i) {
    const ConfigNode p = pts.at(i);
    if (!p.is_sequence() || p.size() != 2) p.fail_expected("an [x, y] pair");
    const double x = p.at(0).as<double>({.min = 0.0, .max = 1e12});
    const double y = p.at(1).as<double>(kEfficiency);
    if (!t.points.empty() && x <= t.points.back().first) {
      p.at(0).fail(fmt::format("expected x > {} (points sorted, x strictly increasing), got {}",
                               t.points.back().first, x));
    }
    t.points.emplace_back(x, y);
  }
  t.source = n.get<std::string>("source", "");
  return t;
}

// Shortest text that reads back as the same double.
std::string num(double v) { return fmt::format("{}", v); }

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch == '\n' ? std::string("\\n") : std::string(1, ch);
  }
  return out + "\"";
}

}  // namespace

std::string_view op_class_name(OpClass c) { return kClassNames[static_cast<size_t>(c)]; }

OpClass parse_op_class(std::string_view name) {
  for (size_t i = 0; i < kNumOpClasses; ++i) {
    if (kClassNames[i] == name) return static_cast<OpClass>(i);
  }
  throw InputError(
      fmt::format("unknown operation class '{}' (known: {})", name, fmt::join(kClassNames, ", ")));
}

std::string_view table_axis_name(TableAxis a) { return kAxisNames[static_cast<size_t>(a)]; }

double EfficiencyTable::at(double x) const {
  if (x <= points.front().first) return points.front().second;
  if (x >= points.back().first) return points.back().second;
  auto hi = std::lower_bound(points.begin(), points.end(), x,
                             [](const auto& p, double v) { return p.first < v; });
  auto lo = hi - 1;
  const double f = (x - lo->first) / (hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

const EfficiencyTable* Profile::table(OpClass c, TableMetric m) const {
  for (const EfficiencyTable& t : tables) {
    if (t.op_class == c && t.metric == m) return &t;
  }
  return nullptr;
}

std::string_view flash_kernel_name(FlashKernel k) { return k == FlashKernel::kFa3 ? "fa3" : "fa2"; }

namespace {

bool is_hopper(const GpuSpec& gpu) {
  if (gpu.compute_capability > 0) return gpu.compute_capability / 10 == 9;
  return gpu.name.rfind("h100", 0) == 0 || gpu.name.rfind("h200", 0) == 0;
}

// The per-GPU part of a profile: GEMM tiling, elementwise traffic, flash attention. Fitted on
// Vidur's measured kernel times (../shared/reference/measured/vidur, imported with
// `kvsim-validate import vidur`) on every other token count; held-out error on the rest is in
// docs/fidelity.md. GPUs without measurements borrow the nearest fitted GPU's efficiencies.
struct GpuFit {
  double gemm_compute, gemm_memory, gemm_floor_us;  // full-wave efficiencies, per-GEMM constant
  double ew_memory, ew_floor_us;                    // elementwise bandwidth efficiency, floor
  double fa2_compute, fa3_compute;                  // flash prefill; fa3 0 = not available
  const char* gemm_source;
  const char* ew_source;
  const char* flash_source;
};

constexpr const char* kFa2A100 =
    "FA2: forward 230 TFLOP/s = 0.73 of A100's 312 (FlashAttention-2 paper, Dao 2023, fig. 4; "
    "facts.md 5)";
constexpr const char* kFlashHopper =
    "FA2 on H100: 335 TFLOP/s at 16k tokens, head dim 128 (FlashAttention-2 paper, H100 figure) "
    "= 0.349 x 989.4 x 16384/(16384+512); FA3: 740 TFLOP/s FP16 (FlashAttention-3 paper, Shah et "
    "al. 2024) = 0.772 of peak the same way";

const GpuFit kA100{
    0.725,
    0.751,
    0.0,
    0.463,
    5.4,
    0.73,
    0.0,
    "fitted on Vidur A100-80GB Llama-2-7B and Llama-3-8B GEMMs (every other token count); held "
    "out (per layer, GEMMs): 4.3% / 2.7% MAPE, worst bin 9.2% / 9.3% (docs/fidelity.md)",
    "fitted on Vidur A100 norm/rope/act/add kernels (sum per layer); train MAPE 2.5%",
    kFa2A100};
const GpuFit kH100{
    0.772,
    1.0,
    11.0,
    0.507,
    4.0,
    0.349,
    0.772,
    "fitted on Vidur H100-SXM Llama-2-7B GEMMs (every other token count); held out (per layer, "
    "GEMMs): 4.5% MAPE, worst bin 9.4% (docs/fidelity.md); memory 1.0 with an 11 us per-GEMM "
    "constant = 2.4 TB/s effective on a 100 MB weight stream",
    "fitted on Vidur H100 norm/rope/act/add kernels (sum per layer); train MAPE 5.2%",
    kFlashHopper};

struct DerivedFit {
  const char* gpu;
  const GpuFit* from;
  const char* why;
};
// Unmeasured GPUs: which fitted GPU's efficiencies they take, and why.
constexpr DerivedFit kDerived[] = {
    {"a100-sxm4-40gb", &kA100,
     "same GA100 die and SM count as the A100-80GB; HBM2 peak from the catalog"},
    {"h200", &kH100, "same GH100 die, 132 SMs, as the H100; only HBM3e (4.8 TB/s) differs"},
    {"l40s", &kA100,
     "assumption: Ada AD102 (142 SMs, GDDR6) unmeasured; takes the A100's efficiencies"},
    {"a40", &kA100,
     "assumption: Ampere GA102 (84 SMs, GDDR6) unmeasured; takes the A100's efficiencies"},
    {"h20", &kH100,
     "assumption: a cut-down GH100 unmeasured; takes the H100's efficiencies (GEMMs by the "
     "roofline: no published SM count)"},
    {"b200", &kH100,
     "assumption: Blackwell unmeasured; takes the H100's efficiencies and FA2's (FA3 is "
     "Hopper-only)"},
    {"gb200", &kH100,
     "assumption: Blackwell unmeasured; takes the H100's efficiencies and FA2's (FA3 is "
     "Hopper-only)"},
    {"mi300x", &kA100, "assumption: CDNA 3 unmeasured; takes the A100's efficiencies"},
    {"mi325x", &kA100, "assumption: CDNA 3 unmeasured; takes the A100's efficiencies"},
    {"l4", &kA100,
     "assumption: Ada AD104 (58 SMs, GDDR6) unmeasured; takes the A100's efficiencies"},
};

}  // namespace

FlashKernel default_flash_kernel(const GpuSpec& gpu) {
  return is_hopper(gpu) ? FlashKernel::kFa3 : FlashKernel::kFa2;
}

Profile default_profile(const GpuSpec& gpu, std::optional<FlashKernel> flash) {
  // The numbers and their sources are spelled out in models/catalog/profiles/<gpu>.yaml (a test
  // checks those files match these values), docs/latency.md and docs/fidelity.md.
  const GpuFit* fit = &kA100;
  std::string derived;
  if (gpu.name.rfind("h100", 0) == 0) fit = &kH100;
  for (const DerivedFit& d : kDerived) {
    if (gpu.name == d.gpu) {
      fit = d.from;
      derived = fmt::format(" (derived: {})", d.why);
    }
  }
  const FlashKernel fk = flash.value_or(default_flash_kernel(gpu));
  if (fk == FlashKernel::kFa3 && !is_hopper(gpu) && !gpu.name.empty()) {
    throw InputError(fmt::format(
        "attention_kernel fa3: FlashAttention-3 runs on Hopper GPUs only (h100-sxm, h200), not {}",
        gpu.name));
  }
  Profile p;
  p.name = gpu.name.empty() ? "default" : gpu.name + "-default";
  p.gpu = gpu.name;
  p.source =
      fmt::format("kvsim built-in profile{}; flash kernel {}", derived, flash_kernel_name(fk));
  auto set = [&](OpClass c, double ce, double me, double launch_us, std::string src) {
    p.of(c) = ClassParams{.compute_efficiency = ce,
                          .memory_efficiency = me,
                          .launch_overhead_s = launch_us * 1e-6,
                          .source = std::move(src)};
  };
  set(OpClass::kGemm, fit->gemm_compute, fit->gemm_memory, fit->gemm_floor_us,
      fit->gemm_source + derived);
  set(OpClass::kAttentionNative, 0.60, 0.80, 4,
      "assumption (eager batched matmuls below FA2's 73%); score traffic counted explicitly");
  const double fa = fk == FlashKernel::kFa3 ? fit->fa3_compute : fit->fa2_compute;
  set(OpClass::kAttentionFlash, fa, 0.80, 4,
      fmt::format("{} ({} selected); memory: assumption{}", fit->flash_source,
                  flash_kernel_name(fk), derived));
  set(OpClass::kAttentionDecode, 0.50, 0.80, 4,
      "memory: between 0.69 (asymptote of FA2 paged decode on H100, onnxruntime PR 21414) and "
      "0.946 (vLLM paged_attention_v2 ncu on RTX 4090, flashinfer 188) (facts.md 5)");
  set(OpClass::kElementwise, 0.50, fit->ew_memory, 0, fit->ew_source + derived);
  set(OpClass::kAllReduce, 1.0, 0.70, 4, "assumption: NCCL ring bus bandwidth / link peak");
  p.flash_seq_half_tokens = 512;
  p.flash_head_dim_exponent = 0.2;
  p.decode_context_half_tokens = 117;
  p.paged_block_half_tokens = 1;
  p.native_score_passes = 4;
  p.native_score_bytes = 2;
  p.gemm_tile_half_intensity = 8;
  p.gemm_combine_exponent = 3;
  p.elementwise_floor_s = fit->ew_floor_us * 1e-6;
  p.curves_source =
      "decode_context_half_tokens: fit of e*c/(c+h) to 14.8% at 32 and 47.4% at 256 tokens "
      "(onnxruntime PR 21414, facts.md 5); native passes: facts.md 7; gemm tile half-intensity "
      "and combine exponent: shared by the A100 and H100 fits (docs/fidelity.md); the rest "
      "assumptions";
  p.iteration_overhead_s = 1e-3;
  p.allreduce_latency_s = 10e-6;
  p.overheads_source = "assumptions, to be replaced by calibration";
  return p;
}

Profile ideal_profile() {
  Profile p;
  p.name = "ideal";
  p.source = "physical lower bound: datasheet peaks, no overheads";
  for (ClassParams& c : p.classes) c = ClassParams{1.0, 1.0, 0.0, "ideal"};
  p.native_score_passes = 4;
  p.native_score_bytes = 2;
  return p;
}

namespace {

Profile profile_from(const ConfigNode& root, const std::string& source_name) {
  if (!root.is_map()) root.fail_expected("a profile (a map)");
  Profile p = default_profile(GpuSpec{});
  p.name = root.get<std::string>("name", source_name);
  p.gpu = root.get<std::string>("gpu", "");
  p.source = root.get<std::string>("source", "");
  if (auto classes = root.optional_child("classes")) {
    if (!classes->is_map()) classes->fail_expected("a map from class name to parameters");
    for (size_t i = 0; i < kNumOpClasses; ++i) {
      const std::string key(kClassNames[i]);
      if (auto c = classes->optional_child(key)) read_class(*c, p.classes[i]);
    }
  }
  if (auto c = root.optional_child("curves")) {
    if (!c->is_map()) c->fail_expected("a map");
    p.flash_seq_half_tokens =
        c->get<double>("flash_seq_half_tokens", p.flash_seq_half_tokens, kTokens);
    p.flash_head_dim_exponent =
        c->get<double>("flash_head_dim_exponent", p.flash_head_dim_exponent, {.min = 0, .max = 4});
    p.decode_context_half_tokens =
        c->get<double>("decode_context_half_tokens", p.decode_context_half_tokens, kTokens);
    p.paged_block_half_tokens =
        c->get<double>("paged_block_half_tokens", p.paged_block_half_tokens, kTokens);
    p.native_score_passes =
        c->get<double>("native_score_passes", p.native_score_passes, {.min = 1, .max = 64});
    p.native_score_bytes =
        c->get<double>("native_score_bytes", p.native_score_bytes, {.min = 1, .max = 8});
    p.gemm_tile_half_intensity = c->get<double>("gemm_tile_half_intensity",
                                                p.gemm_tile_half_intensity, {.min = 0, .max = 1e4});
    p.gemm_combine_exponent =
        c->get<double>("gemm_combine_exponent", p.gemm_combine_exponent, {.min = 1, .max = 64});
    p.elementwise_floor_s = micros_at(*c, "elementwise_floor_us", p.elementwise_floor_s);
    p.elementwise_l2_speedup =
        c->get<double>("elementwise_l2_speedup", p.elementwise_l2_speedup, {.min = 1, .max = 100});
    p.elementwise_cta_s = micros_at(*c, "elementwise_cta_us", p.elementwise_cta_s);
    p.elementwise_serial_load_s = micros_at(*c, "elementwise_serial_load_us", 0.0);
    p.mixed_decode_slope_factor = c->get<double>(
        "mixed_decode_slope_factor", p.mixed_decode_slope_factor, {.min = 0.1, .max = 100});
    p.curves_source = c->get<std::string>("source", p.curves_source);
  }
  if (auto o = root.optional_child("overheads")) {
    if (!o->is_map()) o->fail_expected("a map");
    p.iteration_overhead_s = micros_at(*o, "iteration_us", p.iteration_overhead_s);
    p.allreduce_latency_s = micros_at(*o, "allreduce_latency_us", p.allreduce_latency_s);
    p.per_sequence_overhead_s = micros_at(*o, "per_sequence_us", p.per_sequence_overhead_s);
    p.per_sequence_past_l2_s = micros_at(*o, "per_sequence_past_l2_us", p.per_sequence_past_l2_s);
    p.overheads_source = o->get<std::string>("source", p.overheads_source);
  }
  if (auto r = root.optional_child("routed_experts")) {
    if (!r->is_map()) r->fail_expected("a map");
    RoutedExpertsCost& x = p.routed_experts;
    x.fitted = true;
    x.constant_s = r->get<double>("constant_us", 0.0, kMicros) * 1e-6;
    x.memory_efficiency = r->get<double>("memory_efficiency", 1.0, {.min = 1e-3, .max = 10});
    x.compute_efficiency = r->get<double>("compute_efficiency", 1.0, {.min = 1e-3, .max = 10});
    x.source = r->get<std::string>("source", "");
  }
  if (auto f = root.optional_child("flash_tiles")) {
    if (!f->is_map()) f->fail_expected("a map");
    p.flash_tiles.fitted = true;
    p.flash_tiles.wave_overhead_s = f->get<double>("wave_overhead_us", 0.0, kMicros) * 1e-6;
    p.flash_tiles.source = f->get<std::string>("source", "");
  }
  if (auto tables = root.optional_child("tables")) {
    if (!tables->is_sequence()) tables->fail_expected("a list of tables");
    for (size_t i = 0; i < tables->size(); ++i) {
      EfficiencyTable t = read_table(tables->at(i));
      if (p.table(t.op_class, t.metric) != nullptr) {
        tables->at(i).fail(fmt::format("a second table for {} {}", op_class_name(t.op_class),
                                       metric_name(t.metric)));
      }
      p.tables.push_back(std::move(t));
    }
  }
  root.reject_unknown_keys();
  return p;
}

}  // namespace

Profile parse_profile(std::string_view yaml_text, const std::string& source_name) {
  return profile_from(ConfigNode::parse_string(yaml_text, source_name), source_name);
}

Profile load_profile(const std::filesystem::path& path) {
  return profile_from(ConfigNode::parse_file(path), path.stem().string());
}

std::string write_profile_yaml(const Profile& p) {
  std::string o = "# kvsim latency profile (format: docs/latency.md)\n";
  o += fmt::format("name: {}\ngpu: {}\nsource: {}\nclasses:\n", quoted(p.name), quoted(p.gpu),
                   quoted(p.source));
  for (size_t i = 0; i < kNumOpClasses; ++i) {
    const ClassParams& c = p.classes[i];
    o += fmt::format(
        "  {}:\n    compute_efficiency: {}\n    memory_efficiency: {}\n    launch_overhead_us: {}\n"
        "    source: {}\n",
        kClassNames[i], num(c.compute_efficiency), num(c.memory_efficiency),
        num(c.launch_overhead_s * 1e6), quoted(c.source));
  }
  o += fmt::format(
      "curves:\n  flash_seq_half_tokens: {}\n  flash_head_dim_exponent: {}\n"
      "  decode_context_half_tokens: {}\n  paged_block_half_tokens: {}\n"
      "  native_score_passes: {}\n  native_score_bytes: {}\n  gemm_tile_half_intensity: {}\n"
      "  gemm_combine_exponent: {}\n  elementwise_floor_us: {}\n  source: {}\n",
      num(p.flash_seq_half_tokens), num(p.flash_head_dim_exponent),
      num(p.decode_context_half_tokens), num(p.paged_block_half_tokens), num(p.native_score_passes),
      num(p.native_score_bytes), num(p.gemm_tile_half_intensity), num(p.gemm_combine_exponent),
      num(p.elementwise_floor_s * 1e6), quoted(p.curves_source));
  // Written only when set: older profiles unchanged.
  const std::string key = "  source: ";
  for (auto [name, v, unset] :
       {std::tuple{"elementwise_l2_speedup", p.elementwise_l2_speedup, 1.0},
        {"mixed_decode_slope_factor", p.mixed_decode_slope_factor, 1.0},
        {"elementwise_cta_us", p.elementwise_cta_s * 1e6, 0.0},
        {"elementwise_serial_load_us", p.elementwise_serial_load_s * 1e6, 0.0}}) {
    if (v != unset) o.insert(o.rfind(key), fmt::format("  {}: {}\n", name, num(v)));
  }
  o += fmt::format("overheads:\n  iteration_us: {}\n  allreduce_latency_us: {}\n",
                   num(p.iteration_overhead_s * 1e6), num(p.allreduce_latency_s * 1e6));
  // Written only when set, so profiles without them read and write as before.
  if (p.per_sequence_overhead_s != 0)
    o += fmt::format("  per_sequence_us: {}\n", num(p.per_sequence_overhead_s * 1e6));
  if (p.per_sequence_past_l2_s != 0)
    o += fmt::format("  per_sequence_past_l2_us: {}\n", num(p.per_sequence_past_l2_s * 1e6));
  o += fmt::format("  source: {}\n", quoted(p.overheads_source));
  if (p.routed_experts.fitted) {  // written only when fitted: other profiles unchanged
    const RoutedExpertsCost& x = p.routed_experts;
    o += fmt::format(
        "routed_experts:\n  constant_us: {}\n  memory_efficiency: {}\n"
        "  compute_efficiency: {}\n  source: {}\n",
        num(x.constant_s * 1e6), num(x.memory_efficiency), num(x.compute_efficiency),
        quoted(x.source));
  }
  if (p.flash_tiles.fitted) {
    o += fmt::format("flash_tiles:\n  wave_overhead_us: {}\n  source: {}\n",
                     num(p.flash_tiles.wave_overhead_s * 1e6), quoted(p.flash_tiles.source));
  }
  o += "tables:";
  if (p.tables.empty()) o += " []";
  o += "\n";
  for (const EfficiencyTable& t : p.tables) {
    o += fmt::format("  - class: {}\n    metric: {}\n    axis: {}\n    points: [",
                     op_class_name(t.op_class), metric_name(t.metric), table_axis_name(t.axis));
    for (size_t i = 0; i < t.points.size(); ++i) {
      o +=
          fmt::format("{}[{}, {}]", i ? ", " : "", num(t.points[i].first), num(t.points[i].second));
    }
    o += fmt::format("]\n    source: {}\n", quoted(t.source));
  }
  return o;
}

}  // namespace kvsim
