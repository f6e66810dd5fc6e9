#include "validate/measurements.h"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

#include "core/csv_line.h"
#include "core/errors.h"

namespace kvsim::validate {

namespace {

const std::vector<std::string> kColumns = {"kernel",
                                           "version",
                                           "dtype",
                                           "batch",
                                           "heads",
                                           "kv_heads",
                                           "seq_q",
                                           "seq_kv",
                                           "head_dim",
                                           "causal",
                                           "context",
                                           "block_size",
                                           "m",
                                           "n",
                                           "k",
                                           "bytes",
                                           "split",
                                           "check",
                                           "max_abs_error",
                                           "max_rel_error",
                                           "reps",
                                           "seconds",
                                           "seconds_min",
                                           "seconds_p10",
                                           "seconds_p90",
                                           "spread",
                                           "flops",
                                           "bytes_moved",
                                           "flop_per_s",
                                           "bytes_per_s",
                                           "workspace_bytes",
                                           "skipped"};

std::string g9(double v) { return fmt::format("{:.9g}", v); }

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  split_csv_line(line, out);  // an unclosed quote leaves a field that fails its column's check
  return out;
}

std::string quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

// One row's fields by column name, with typed accessors that name the file, line and column.
class Row {
 public:
  Row(const std::map<std::string, std::string>& f, std::string where)
      : f_(f), where_(std::move(where)) {}
  const std::string& str(const std::string& col) const { return f_.at(col); }
  int64_t i64(const std::string& col) const {
    const std::string& s = str(col);
    if (s.empty()) return 0;
    int64_t v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) bad(col, "an integer");
    return v;
  }
  double f64(const std::string& col) const {
    const std::string& s = str(col);
    if (s.empty()) return 0;
    try {
      size_t used = 0;
      const double v = std::stod(s, &used);
      if (used != s.size()) bad(col, "a number");
      return v;
    } catch (const std::logic_error&) {
      bad(col, "a number");
    }
  }
  [[noreturn]] void bad(const std::string& col, const std::string& what) const {
    throw InputError(
        fmt::format("{}: column {}: expected {}, got \"{}\"", where_, col, what, str(col)));
  }
  const std::string& where() const { return where_; }

 private:
  const std::map<std::string, std::string>& f_;
  std::string where_;
};

Measurement parse_row(const Row& r) {
  Measurement m;
  KernelCase& c = m.c;
  try {
    c.kind = parse_class(r.str("kernel"));
    c.precision = kernels::parse_precision(r.str("dtype"));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", r.where(), e.what()));
  }
  c.version = static_cast<int>(r.i64("version"));
  c.attn = {.batch = r.i64("batch"),
            .heads = r.i64("heads"),
            .kv_heads = r.i64("kv_heads"),
            .seq_q = r.i64("seq_q"),
            .seq_kv = r.i64("seq_kv"),
            .head_dim = r.i64("head_dim"),
            .causal = r.str("causal") == "true"};
  c.paged = {.batch = r.i64("batch"),
             .heads = r.i64("heads"),
             .kv_heads = r.i64("kv_heads"),
             .head_dim = r.i64("head_dim"),
             .context = r.i64("context"),
             .block_size = r.i64("block_size")};
  c.gemm = {.m = r.i64("m"), .n = r.i64("n"), .k = r.i64("k")};
  c.bytes = r.i64("bytes");
  c.split = r.str("split");
  if (c.split != "train" && c.split != "test" && c.split != "none")
    r.bad("split", "train, test or none");
  try {
    c.validate();
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", r.where(), e.what()));
  }
  m.check = r.str("check");
  m.max_abs_error = r.f64("max_abs_error");
  m.max_rel_error = r.f64("max_rel_error");
  m.reps = static_cast<int>(r.i64("reps"));
  m.seconds = r.f64("seconds");
  m.seconds_min = r.f64("seconds_min");
  m.seconds_p10 = r.f64("seconds_p10");
  m.seconds_p90 = r.f64("seconds_p90");
  m.skipped = r.str("skipped");
  if (m.reps > 0 && !(m.seconds > 0)) r.bad("seconds", "a positive number for a timed row");
  return m;
}

}  // namespace

std::string measurements_csv_header() {
  std::string h;
  for (const std::string& c : kColumns) h += (h.empty() ? "" : ",") + c;
  return h;
}

std::string measurements_csv_row(const Measurement& m) {
  const KernelCase& c = m.c;
  const bool attn = c.kind == KernelClass::kNative || c.kind == KernelClass::kFlash;
  const bool paged = c.kind == KernelClass::kPagedDecode;
  const bool gemm = c.kind == KernelClass::kGemm;
  const bool membw = c.kind == KernelClass::kMembwCopy || c.kind == KernelClass::kMembwRead;
  auto opt = [](bool on, int64_t v) { return on ? std::to_string(v) : std::string(); };
  std::vector<std::string> f = {std::string(class_name(c.kind)),
                                std::to_string(c.version),
                                std::string(kernels::precision_name(c.precision)),
                                opt(attn, c.attn.batch) + opt(paged, c.paged.batch),
                                opt(attn, c.attn.heads) + opt(paged, c.paged.heads),
                                opt(attn, c.attn.kv_heads) + opt(paged, c.paged.kv_heads),
                                opt(attn, c.attn.seq_q),
                                opt(attn, c.attn.seq_kv),
                                opt(attn, c.attn.head_dim) + opt(paged, c.paged.head_dim),
                                attn ? (c.attn.causal ? "true" : "false") : "",
                                opt(paged, c.paged.context),
                                opt(paged, c.paged.block_size),
                                opt(gemm, c.gemm.m),
                                opt(gemm, c.gemm.n),
                                opt(gemm, c.gemm.k),
                                opt(membw, c.bytes),
                                c.split,
                                m.check,
                                g9(m.max_abs_error),
                                g9(m.max_rel_error),
                                std::to_string(m.reps),
                                g9(m.seconds),
                                g9(m.seconds_min),
                                g9(m.seconds_p10),
                                g9(m.seconds_p90),
                                g9(m.spread()),
                                g9(c.flops()),
                                g9(c.bytes_moved()),
                                g9(m.flop_per_s()),
                                g9(m.bytes_per_s()),
                                std::to_string(c.workspace_bytes()),
                                quote(m.skipped)};
  std::string row;
  for (size_t i = 0; i < f.size(); ++i) row += (i ? "," : "") + f[i];
  return row;
}

std::string measurements_csv(const std::vector<Measurement>& rows) {
  std::string out = measurements_csv_header() + "\n";
  for (const Measurement& m : rows) out += measurements_csv_row(m) + "\n";
  return out;
}

std::vector<Measurement> read_measurements(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in)
    throw InputError(
        fmt::format("{}: cannot open (run kvsim-validate measure first?)", path.string()));
  std::string line;
  if (!std::getline(in, line) || split_csv(line) != kColumns) {
    throw InputError(
        fmt::format("{}:1: not a kvsim-validate measurements.csv (expected the header "
                    "\"{}...\")",
                    path.string(), measurements_csv_header().substr(0, 40)));
  }
  std::vector<Measurement> out;
  int line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_csv(line);
    const std::string where = fmt::format("{}:{}", path.string(), line_no);
    if (cells.size() != kColumns.size()) {
      throw InputError(
          fmt::format("{}: expected {} fields, got {}", where, kColumns.size(), cells.size()));
    }
    std::map<std::string, std::string> fields;
    for (size_t i = 0; i < cells.size(); ++i) fields[kColumns[i]] = cells[i];
    out.push_back(parse_row(Row(fields, where)));
  }
  return out;
}

}  // namespace kvsim::validate
