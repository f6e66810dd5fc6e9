#include "validate/vllm_run/heldout_report.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace kvsim::validate {

namespace {
const char* const kBins[] = {"1-4", "5-64", "65-256", "257-1024", "1025-4096", ">4096"};
}  // namespace

std::string token_bin(int64_t t) {
  if (t <= 4) return "1-4";
  if (t <= 64) return "5-64";
  if (t <= 256) return "65-256";
  if (t <= 1024) return "257-1024";
  if (t <= 4096) return "1025-4096";
  return ">4096";
}

HeldoutReport heldout_report(const std::vector<Heldout>& held) {
  HeldoutReport r;
  r.csv = "op_class,op,tokens,bin,measured_s,predicted_s,rel_error\n";
  struct Acc {
    double abs = 0, signed_ = 0;
    int n = 0;
  };
  std::map<std::string, std::map<std::string, Acc>> acc;  // class -> bin ("all" too)
  double total_abs = 0;
  for (const Heldout& h : held) {
    const double e = h.predicted / h.measured - 1;
    r.csv += fmt::format("{},{},{},{},{:.9g},{:.9g},{:.6f}\n", h.op_class, h.op, h.tokens,
                         token_bin(h.tokens), h.measured, h.predicted, e);
    for (const std::string& b : {std::string("all"), token_bin(h.tokens)}) {
      Acc& a = acc[h.op_class][b];
      a.abs += std::abs(e);
      a.signed_ += e;
      a.n += 1;
    }
    total_abs += std::abs(e);
  }
  r.mape = held.empty() ? 0.0 : total_abs / static_cast<double>(held.size());
  r.table = fmt::format("{:<18} {:>6} {:>7} {:>7}", "held out", "rows", "MAPE", "signed");
  for (const char* b : kBins) r.table += fmt::format(" {:>9}", b);
  r.table += "\n";
  for (const auto& [cls, bins] : acc) {
    const Acc& all = bins.at("all");
    nlohmann::ordered_json c = {
        {"rows", all.n}, {"mape", all.abs / all.n}, {"signed", all.signed_ / all.n}};
    r.table += fmt::format("{:<18} {:>6} {:>6.1f}% {:>+6.1f}%", cls, all.n, 100 * all.abs / all.n,
                           100 * all.signed_ / all.n);
    for (const char* b : kBins) {
      const auto it = bins.find(b);
      if (it == bins.end()) {
        r.table += fmt::format(" {:>9}", "-");
        continue;
      }
      c["bins"][b] = {{"rows", it->second.n}, {"mape", it->second.abs / it->second.n}};
      r.table += fmt::format(" {:>8.1f}%", 100 * it->second.abs / it->second.n);
    }
    r.table += "\n";
    r.by_class[cls] = c;
  }
  return r;
}

}  // namespace kvsim::validate
