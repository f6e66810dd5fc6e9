#include "validate/replay/e2e_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/atomic_file.h"
#include "core/csv_line.h"
#include "core/errors.h"
#include "core/text_table.h"
#include "validate/backend.h"

namespace kvsim::validate {

namespace {

// A CSV file as rows of named fields. kvsim's result CSVs quote nothing but the odd text field,
// so a field in double quotes (with "" for a quote) is enough.
class Csv {
 public:
  explicit Csv(const std::filesystem::path& path) : path_(path) {
    std::ifstream in(path);
    if (!in) throw InputError(fmt::format("{}: cannot open", path.string()));
    std::string line;
    if (!std::getline(in, line)) throw InputError(fmt::format("{}:1: empty file", path.string()));
    header_ = split(line);
    for (int n = 2; std::getline(in, line); ++n) {
      if (line.empty()) continue;
      rows_.push_back(split(line));
      lines_.push_back(n);
      if (rows_.back().size() != header_.size()) {
        throw InputError(fmt::format("{}:{}: {} fields, the header has {}", path.string(), n,
                                     rows_.back().size(), header_.size()));
      }
    }
  }
  size_t size() const { return rows_.size(); }
  size_t column(const std::string& name) const {
    auto it = std::find(header_.begin(), header_.end(), name);
    if (it == header_.end())
      throw InputError(fmt::format("{}:1: no column '{}'", path_.string(), name));
    return static_cast<size_t>(it - header_.begin());
  }
  const std::string& text(size_t row, size_t col) const { return rows_[row][col]; }
  // An empty field is "no value" (e.g. tpot_s of a one-token request).
  std::optional<double> number(size_t row, size_t col) const {
    const std::string& s = rows_[row][col];
    if (s.empty()) return std::nullopt;
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || !std::isfinite(v)) {
      throw InputError(fmt::format("{}:{}: {} '{}' is not a finite number", path_.string(),
                                   lines_[row], header_[col], s));
    }
    return v;
  }
  double required(size_t row, size_t col) const {
    auto v = number(row, col);
    if (!v)
      throw InputError(
          fmt::format("{}:{}: {} is empty", path_.string(), lines_[row], header_[col]));
    return *v;
  }
  int line(size_t row) const { return lines_[row]; }

 private:
  static std::vector<std::string> split(const std::string& line) {
    std::vector<std::string> out;
    split_csv_line(line, out);  // an unclosed quote leaves a field that fails as a number
    return out;
  }

  std::filesystem::path path_;
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<int> lines_;
};

struct IterationRow {
  std::string shape;
  std::string bin;
  double modeled = 0, measured = 0;
  double rel() const { return (modeled - measured) / measured; }
};

std::string token_bin(int64_t tokens) {
  if (tokens < 8) return "1-7";
  if (tokens < 64) return "8-63";
  if (tokens < 512) return "64-511";
  return "512+";
}

IterationGroup group(const std::string& kind, const std::string& name,
                     const std::vector<const IterationRow*>& rows) {
  IterationGroup g;
  g.kind = kind;
  g.name = name;
  g.iterations = static_cast<int64_t>(rows.size());
  std::vector<double> e;
  double abs_sum = 0;
  for (const IterationRow* r : rows) {
    e.push_back(r->rel());
    abs_sum += std::abs(r->rel());
    g.modeled_s += r->modeled;
    g.measured_s += r->measured;
  }
  g.mape = abs_sum / static_cast<double>(rows.size());
  g.median_rel_error = percentile(e, 50);
  g.p90_rel_error = percentile(e, 90);
  return g;
}

std::vector<IterationGroup> compare_iterations(const std::filesystem::path& file) {
  const Csv csv(file);
  const size_t pseqs = csv.column("prefill_seqs"), ptok = csv.column("prefill_tokens"),
               dseqs = csv.column("decode_seqs"), mod = csv.column("modeled_s"),
               mea = csv.column("measured_s");
  std::vector<IterationRow> rows;
  for (size_t i = 0; i < csv.size(); ++i) {
    IterationRow r;
    const auto np = static_cast<int64_t>(csv.required(i, pseqs));
    const auto nd = static_cast<int64_t>(csv.required(i, dseqs));
    r.shape = np > 0 && nd > 0 ? "mixed" : np > 0 ? "prefill-only" : "decode-only";
    r.bin = token_bin(static_cast<int64_t>(csv.required(i, ptok)) + nd);
    r.modeled = csv.required(i, mod);
    r.measured = csv.required(i, mea);
    if (!(r.measured > 0)) {
      throw InputError(fmt::format("{}:{}: measured_s must be > 0", file.string(), csv.line(i)));
    }
    rows.push_back(r);
  }
  if (rows.empty()) throw InputError(fmt::format("{}: no iterations", file.string()));
  std::vector<IterationGroup> out;
  auto select = [&](auto pred) {
    std::vector<const IterationRow*> v;
    for (const IterationRow& r : rows) {
      if (pred(r)) v.push_back(&r);
    }
    return v;
  };
  out.push_back(group("all", "all", select([](const IterationRow&) { return true; })));
  for (const char* s : {"prefill-only", "decode-only", "mixed"}) {
    auto v = select([&](const IterationRow& r) { return r.shape == s; });
    if (!v.empty()) out.push_back(group("shape", s, v));
  }
  for (const char* b : {"1-7", "8-63", "64-511", "512+"}) {
    auto v = select([&](const IterationRow& r) { return r.bin == b; });
    if (!v.empty()) out.push_back(group("tokens", b, v));
  }
  return out;
}

// One policy's requests: id -> (ttft, tpot, e2e), outcomes, preemptions.
struct Side {
  std::map<int64_t, std::array<std::optional<double>, 3>> metrics;
  std::map<std::string, int64_t> outcomes;
  int64_t preemptions = 0;
};

std::vector<std::pair<std::string, Side>> read_requests(const std::filesystem::path& file) {
  const Csv csv(file);
  const size_t pol = csv.column("policy"), id = csv.column("id"), out = csv.column("outcome"),
               pre = csv.column("preemptions");
  const std::array<size_t, 3> cols = {csv.column("ttft_s"), csv.column("tpot_s"),
                                      csv.column("e2e_s")};
  std::vector<std::pair<std::string, Side>> sides;
  for (size_t i = 0; i < csv.size(); ++i) {
    const std::string& p = csv.text(i, pol);
    if (sides.empty() || sides.back().first != p) sides.emplace_back(p, Side{});
    Side& s = sides.back().second;
    const auto rid = static_cast<int64_t>(csv.required(i, id));
    auto& m = s.metrics[rid];
    for (size_t k = 0; k < 3; ++k) m[k] = csv.number(i, cols[k]);
    ++s.outcomes[csv.text(i, out)];
    s.preemptions += static_cast<int64_t>(csv.number(i, pre).value_or(0));
  }
  return sides;
}

MetricCompare compare_metric(const std::string& name, size_t k, const Side& modeled,
                             const Side& measured) {
  MetricCompare m;
  m.metric = name;
  std::vector<double> a, b, e;
  for (const auto& [id, meas] : measured.metrics) {
    auto it = modeled.metrics.find(id);
    if (it == modeled.metrics.end() || !meas[k] || !it->second[k]) continue;
    a.push_back(*it->second[k]);
    b.push_back(*meas[k]);
    if (*meas[k] > 0) e.push_back((*it->second[k] - *meas[k]) / *meas[k]);
  }
  m.requests = static_cast<int64_t>(a.size());
  if (a.empty()) return m;
  m.modeled_median = percentile(a, 50);
  m.modeled_p90 = percentile(a, 90);
  m.measured_median = percentile(b, 50);
  m.measured_p90 = percentile(b, 90);
  auto rel = [](double x, double y) { return y > 0 ? (x - y) / y : 0.0; };
  m.median_rel_error = rel(m.modeled_median, m.measured_median);
  m.p90_rel_error = rel(m.modeled_p90, m.measured_p90);
  if (!e.empty()) {
    std::vector<double> abs_e;
    for (double x : e) abs_e.push_back(std::abs(x));
    m.median_abs_request_error = percentile(abs_e, 50);
    for (int q = 0; q <= 10; ++q) m.cdf.emplace_back(q / 10.0, percentile(e, q * 10.0));
  }
  return m;
}

std::string g9(double v) { return fmt::format("{:.9g}", v); }

}  // namespace

E2eComparison compare_e2e(const std::filesystem::path& modeled_dir,
                          const std::filesystem::path& measured_dir) {
  E2eComparison c;
  c.iterations = compare_iterations(measured_dir / "iterations.csv");
  const auto modeled = read_requests(modeled_dir / "requests.csv");
  const auto measured = read_requests(measured_dir / "requests.csv");
  for (const auto& entry : measured) {
    // Not a structured binding: clang 14 (the sanitizer build) cannot capture one in a lambda.
    const std::string& name = entry.first;
    const auto& meas = entry.second;
    auto it = std::find_if(modeled.begin(), modeled.end(),
                           [&](const auto& p) { return p.first == name; });
    if (it == modeled.end()) {
      throw InputError(fmt::format("{}: no rows of policy '{}' (measured has them)",
                                   (modeled_dir / "requests.csv").string(), name));
    }
    const Side& mod = it->second;
    PolicyCompare p;
    p.policy = name;
    for (const auto& [id, unused] : meas.metrics) p.matched += mod.metrics.count(id) ? 1 : 0;
    const char* names[] = {"ttft", "tpot", "e2e"};
    for (size_t k = 0; k < 3; ++k) p.metrics.push_back(compare_metric(names[k], k, mod, meas));
    p.modeled_preemptions = mod.preemptions;
    p.measured_preemptions = meas.preemptions;
    p.modeled_outcomes = mod.outcomes;
    p.measured_outcomes = meas.outcomes;
    c.policies.push_back(std::move(p));
  }
  return c;
}

void write_e2e(const E2eComparison& c, const std::filesystem::path& out_dir) {
  nlohmann::ordered_json j;
  j["tool"] = "kvsim-validate e2e";
  j["errors"] = "relative, (modeled - measured) / measured; mape = mean |error|";
  std::string icsv =
      "kind,group,iterations,mape,median_rel_error,p90_rel_error,modeled_s,measured_s\n";
  for (const IterationGroup& g : c.iterations) {
    j["iterations"].push_back({{"kind", g.kind},
                               {"group", g.name},
                               {"iterations", g.iterations},
                               {"mape", g.mape},
                               {"median_rel_error", g.median_rel_error},
                               {"p90_rel_error", g.p90_rel_error},
                               {"modeled_s", g.modeled_s},
                               {"measured_s", g.measured_s}});
    icsv +=
        fmt::format("{},{},{},{},{},{},{},{}\n", g.kind, g.name, g.iterations, g9(g.mape),
                    g9(g.median_rel_error), g9(g.p90_rel_error), g9(g.modeled_s), g9(g.measured_s));
  }
  std::string rcsv =
      "policy,metric,requests,modeled_median_s,measured_median_s,median_rel_error,modeled_p90_s,"
      "measured_p90_s,p90_rel_error,median_abs_request_error\n";
  for (const PolicyCompare& p : c.policies) {
    nlohmann::ordered_json pj;
    pj["policy"] = p.policy;
    pj["matched_requests"] = p.matched;
    for (const MetricCompare& m : p.metrics) {
      nlohmann::ordered_json cdf = nlohmann::ordered_json::array();
      for (const auto& [q, e] : m.cdf) cdf.push_back({{"quantile", q}, {"rel_error", e}});
      pj["metrics"][m.metric] = {
          {"requests", m.requests},
          {"modeled", {{"median_s", m.modeled_median}, {"p90_s", m.modeled_p90}}},
          {"measured", {{"median_s", m.measured_median}, {"p90_s", m.measured_p90}}},
          {"median_rel_error", m.median_rel_error},
          {"p90_rel_error", m.p90_rel_error},
          {"median_abs_request_error", m.median_abs_request_error},
          {"request_error_cdf", cdf}};
      rcsv += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", p.policy, m.metric, m.requests,
                          g9(m.modeled_median), g9(m.measured_median), g9(m.median_rel_error),
                          g9(m.modeled_p90), g9(m.measured_p90), g9(m.p90_rel_error),
                          g9(m.median_abs_request_error));
    }
    pj["preemptions"] = {{"modeled", p.modeled_preemptions}, {"measured", p.measured_preemptions}};
    pj["outcomes"] = {{"modeled", p.modeled_outcomes},
                      {"measured", p.measured_outcomes},
                      {"identical", p.outcomes_identical()}};
    j["policies"].push_back(pj);
  }
  write_file_atomic(out_dir / "e2e_iterations.csv", icsv);
  write_file_atomic(out_dir / "e2e_requests.csv", rcsv);
  write_file_atomic(out_dir / "e2e.json", j.dump(2) + "\n");
}

std::string e2e_table(const E2eComparison& c) {
  auto pct = [](double v) { return fmt::format("{:+.1f}%", v * 100); };
  cli::TextTable it(
      {"iterations", "n", "MAPE", "median err", "p90 err", "modeled s", "measured s"});
  for (const IterationGroup& g : c.iterations) {
    it.add_row({g.name, std::to_string(g.iterations), fmt::format("{:.1f}%", g.mape * 100),
                pct(g.median_rel_error), pct(g.p90_rel_error), fmt::format("{:.3f}", g.modeled_s),
                fmt::format("{:.3f}", g.measured_s)});
  }
  cli::TextTable rq(
      {"policy", "metric", "n", "median mod/meas (ms)", "err", "p90 mod/meas (ms)", "err"});
  std::string outcomes;
  for (const PolicyCompare& p : c.policies) {
    for (const MetricCompare& m : p.metrics) {
      rq.add_row({p.policy, m.metric, std::to_string(m.requests),
                  fmt::format("{:.2f} / {:.2f}", m.modeled_median * 1e3, m.measured_median * 1e3),
                  pct(m.median_rel_error),
                  fmt::format("{:.2f} / {:.2f}", m.modeled_p90 * 1e3, m.measured_p90 * 1e3),
                  pct(m.p90_rel_error)});
    }
    auto counts = [](const std::map<std::string, int64_t>& m) {
      std::string s;
      for (const auto& [k, v] : m) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", k, v);
      return s;
    };
    outcomes += fmt::format("{}: outcomes modeled [{}] measured [{}]{}; preemptions {} / {}\n",
                            p.policy, counts(p.modeled_outcomes), counts(p.measured_outcomes),
                            p.outcomes_identical() ? " (identical)" : " (DIFFER)",
                            p.modeled_preemptions, p.measured_preemptions);
  }
  return it.render() + "\n" + rq.render() + "\n" + outcomes;
}

}  // namespace kvsim::validate
