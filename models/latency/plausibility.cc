#include "models/latency/plausibility.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "core/csv_line.h"
#include "core/errors.h"
#include "models/catalog.h"

namespace kvsim {

namespace {

constexpr std::array<std::string_view, 10> kColumns = {
    "label",      "model",   "gpu",   "attention", "kv_heads",
    "block_size", "seq_len", "batch", "metric",    "value"};

struct MetricInfo {
  std::string_view name;
  ClaimKind kind;
  bool throughput;
  double to_canonical;  // value x this = seconds (times) or tokens/s (throughputs)
  bool inverse;         // decode_ms_per_token: tokens/s = 1000 / value
};
constexpr std::array<MetricInfo, 6> kMetrics = {{
    {"prefill_ms", ClaimKind::kPrefill, false, 1e-3, false},
    {"prefill_s", ClaimKind::kPrefill, false, 1.0, false},
    {"ttft_ms", ClaimKind::kTtft, false, 1e-3, false},
    {"ttft_s", ClaimKind::kTtft, false, 1.0, false},
    {"decode_tokens_per_s", ClaimKind::kDecode, true, 1.0, false},
    {"decode_ms_per_token", ClaimKind::kDecode, true, 1e3, true},
}};

// Splits one CSV line (core/csv_line.h), trimming spaces around each field.
std::vector<std::string> split_csv(std::string_view line, const std::string& where) {
  std::vector<std::string> out;
  if (!split_csv_line(line, out))
    throw InputError(fmt::format("{}: unterminated quoted field", where));
  for (std::string& f : out) {  // trim spaces around unquoted text
    const size_t b = f.find_first_not_of(" \t");
    const size_t e = f.find_last_not_of(" \t");
    f = b == std::string::npos ? "" : f.substr(b, e - b + 1);
  }
  return out;
}

int64_t parse_int(const std::string& s, const char* column, int64_t min, int64_t max,
                  const std::string& where) {
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < min || v > max) {
    throw InputError(fmt::format("{}: column '{}': expected an integer in [{}, {}], got \"{}\"",
                                 where, column, min, max, s));
  }
  return v;
}

double parse_positive(const std::string& s, const char* column, const std::string& where) {
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v) || v <= 0) {
    throw InputError(
        fmt::format("{}: column '{}': expected a number > 0, got \"{}\"", where, column, s));
  }
  return v;
}

}  // namespace

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPlausible: return "plausible";
    case Verdict::kOptimistic: return "optimistic";
    case Verdict::kImpossible: return "impossible";
  }
  return "?";
}

Verdict judge(double claimed, double lower_bound, double estimate, bool throughput) {
  const bool beyond_bound = throughput ? claimed > lower_bound : claimed < lower_bound;
  const double speedup = throughput ? claimed / estimate : estimate / claimed;
  if (beyond_bound) return Verdict::kImpossible;
  if (speedup > kOptimisticFactor) return Verdict::kOptimistic;
  return Verdict::kPlausible;
}

std::vector<Claim> parse_claims(std::string_view text, const std::string& file,
                                const Catalog& catalog) {
  std::vector<Claim> claims;
  std::map<std::string, size_t> col;  // column name -> index, from the header row
  std::istringstream in{std::string(text)};
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = fmt::format("{}:{}", file, line_no);
    if (line.find_first_not_of(" \t") == std::string::npos ||
        line[line.find_first_not_of(" \t")] == '#') {
      continue;
    }
    const std::vector<std::string> f = split_csv(line, where);
    if (col.empty()) {
      for (size_t i = 0; i < f.size(); ++i) col[f[i]] = i;
      for (std::string_view want : kColumns) {
        if (!col.count(std::string(want))) {
          throw InputError(fmt::format("{}: header row lacks column '{}' (expected: {})", where,
                                       want, fmt::join(kColumns, ",")));
        }
      }
      if (col.size() != f.size() || f.size() != kColumns.size()) {
        throw InputError(fmt::format("{}: header row: expected exactly the columns {}", where,
                                     fmt::join(kColumns, ",")));
      }
      continue;
    }
    if (f.size() != kColumns.size()) {
      throw InputError(
          fmt::format("{}: expected {} fields, got {}", where, kColumns.size(), f.size()));
    }
    auto get = [&](const char* name) -> const std::string& { return f[col.at(name)]; };
    Claim c;
    c.file = file;
    c.line = line_no;
    c.label = get("label");
    c.model = get("model");
    c.gpu = get("gpu");
    try {
      const ModelSpec& m = catalog.model(c.model);
      catalog.gpu(c.gpu);
      c.attention = parse_attention_kind(get("attention"));
      if (!get("kv_heads").empty()) {
        c.kv_heads = static_cast<int>(parse_int(get("kv_heads"), "kv_heads", 1, m.heads, where));
        if (m.heads % c.kv_heads != 0) {
          throw InputError(
              fmt::format("column 'kv_heads': expected a divisor of the model's {} "
                          "query heads, got {}",
                          m.heads, c.kv_heads));
        }
      }
    } catch (const InputError& e) {
      const std::string msg = e.what();
      throw InputError(msg.rfind(where, 0) == 0 ? msg : fmt::format("{}: {}", where, msg));
    }
    c.block_tokens =
        static_cast<int>(parse_int(get("block_size"), "block_size", 0, 1 << 20, where));
    c.seq_len = parse_int(get("seq_len"), "seq_len", 1, int64_t{1} << 32, where);
    c.batch = parse_int(get("batch"), "batch", 1, 1 << 20, where);
    c.metric = get("metric");
    const MetricInfo* info = nullptr;
    for (const MetricInfo& mi : kMetrics) {
      if (mi.name == c.metric) info = &mi;
    }
    if (info == nullptr) {
      std::vector<std::string_view> names;
      for (const MetricInfo& mi : kMetrics) names.push_back(mi.name);
      throw InputError(fmt::format("{}: column 'metric': unknown metric \"{}\" (known: {})", where,
                                   c.metric, fmt::join(names, ", ")));
    }
    c.value = parse_positive(get("value"), "value", where);
    c.kind = info->kind;
    c.throughput = info->throughput;
    c.claimed = info->inverse ? info->to_canonical / c.value : c.value * info->to_canonical;
    claims.push_back(std::move(c));
  }
  if (col.empty()) {
    throw InputError(
        fmt::format("{}: no header row (expected: {})", file, fmt::join(kColumns, ",")));
  }
  return claims;
}

std::vector<Claim> read_claims(const std::filesystem::path& path, const Catalog& catalog) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw InputError(fmt::format("{}: no such file", path.string()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read file", path.string()));
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse_claims(buf.str(), path.string(), catalog);
}

ClaimCheck check_claim(const Claim& c, const Catalog& catalog) {
  ModelSpec model = catalog.model(c.model);
  if (c.kv_heads > 0) model.kv_heads = c.kv_heads;
  const GpuSpec& gpu = catalog.gpu(c.gpu);
  const LatencyModel lm(model, gpu, default_profile(gpu), c.attention, 1);
  const SequenceLatency s = sequence_latency(lm, c.seq_len, c.batch, c.block_tokens);
  ClaimCheck r;
  r.claim = c;
  r.peak_flops = gpu.fp16_flops;
  r.peak_bytes_per_s = gpu.hbm_bytes_per_s;
  const IterationCost* bound = &s.prefill_bound;
  double claimed_iteration_s = c.claimed;
  switch (c.kind) {
    case ClaimKind::kPrefill:
      r.lower_bound = s.prefill_lower_bound_s;
      r.estimate = s.prefill_s;
      break;
    case ClaimKind::kTtft:
      r.lower_bound = s.ttft_lower_bound_s;
      r.estimate = s.ttft_s;
      break;
    case ClaimKind::kDecode:
      bound = &s.decode_bound;
      r.lower_bound = s.decode_tokens_per_s_upper_bound;
      r.estimate = s.decode_tokens_per_s;
      claimed_iteration_s = static_cast<double>(c.batch) / c.claimed;
      break;
  }
  r.flops = bound->flops;
  r.bytes = bound->bytes;
  r.compute_floor_s = r.flops / gpu.fp16_flops;
  r.memory_floor_s = r.bytes / gpu.hbm_bytes_per_s;
  r.implied_flops_per_s = r.flops / claimed_iteration_s;
  r.bound_fraction = c.throughput ? c.claimed / r.lower_bound : r.lower_bound / c.claimed;
  r.verdict = judge(c.claimed, r.lower_bound, r.estimate, c.throughput);
  return r;
}

}  // namespace kvsim
