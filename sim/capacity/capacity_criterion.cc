#include "sim/capacity/capacity_criterion.h"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

#include "core/errors.h"

namespace kvsim {

namespace {

double parse_limit(const std::string& term, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v >= 0) || v > 1e12) {
    throw InputError(fmt::format("--slo: '{}': expected a number >= 0 after '='", term));
  }
  return v;
}

}  // namespace

CapacityCriterion parse_capacity_criterion(const std::string& slo, double min_availability) {
  CapacityCriterion c;
  std::stringstream ss(slo);
  std::string term;
  while (std::getline(ss, term, ',')) {
    if (term.empty()) continue;
    const auto eq = term.find('=');
    if (eq == std::string::npos) {
      throw InputError(fmt::format("--slo: '{}': expected name=value (e.g. ttft_p99_s=2)", term));
    }
    const std::string name = term.substr(0, eq);
    CapacityCriterion::Bound b{.text = term, .limit = parse_limit(term, term.substr(eq + 1))};
    if (name == "slo_attainment" || name == "availability") {
      b.metric = name;
      b.at_least = true;
      if (b.limit > 1) throw InputError(fmt::format("--slo: '{}': a share is at most 1", term));
    } else {
      bool ok = false;
      for (const char* m : {"ttft", "tpot", "e2e"}) {
        for (const char* s : {"p50", "p90", "p99", "mean"}) {
          if (name == fmt::format("{}_{}_s", m, s)) {
            b.metric = fmt::format("{}_s", m);
            b.stat = s;
            ok = true;
          }
        }
      }
      if (!ok) {
        throw InputError(fmt::format(
            "--slo: unknown figure '{}' (expected <ttft|tpot|e2e>_<p50|p90|p99|mean>_s, "
            "slo_attainment or availability)",
            name));
      }
    }
    c.bounds.push_back(b);
  }
  if (min_availability > 0) {
    c.bounds.push_back({.text = fmt::format("availability={}", min_availability),
                        .metric = "availability",
                        .limit = min_availability,
                        .at_least = true});
  }
  if (c.bounds.empty()) throw InputError("--slo: no bound given (e.g. --slo ttft_p99_s=2)");
  return c;
}

bool CapacityCriterion::met(const nlohmann::json& p, std::string* why) const {
  auto miss = [&](const std::string& m) {
    if (why) *why = m;
    return false;
  };
  for (const Bound& b : bounds) {
    double v = 0;
    if (b.stat.empty()) {
      const auto& j = p.at(b.metric);
      if (j.is_null()) return miss(fmt::format("{}: the scenario has no `slo:` block", b.text));
      v = j.get<double>();
    } else {
      const auto& s = p.at(b.metric);
      if (s.at("count").get<int64_t>() == 0)
        return miss(fmt::format("{}: no completed request", b.text));
      v = s.at(b.stat).get<double>();
    }
    const auto name = b.text.substr(0, b.text.find('='));
    if (b.at_least ? v < b.limit : v > b.limit) {
      return miss(fmt::format("{} {:.4g} {} {}", name, v, b.at_least ? "<" : ">", b.limit));
    }
  }
  return true;
}

std::string CapacityCriterion::text() const {
  std::string t;
  for (const Bound& b : bounds) t += (t.empty() ? "" : ",") + b.text;
  return t;
}

}  // namespace kvsim
