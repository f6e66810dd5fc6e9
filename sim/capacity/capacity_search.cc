#include "sim/capacity/capacity_search.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config_node.h"
#include "core/errors.h"
#include "core/text_table.h"
#include "sim/capacity/capacity_grid.h"
#include "sim/config/scenario.h"
#include "sim/sweep/sweep_plan.h"
#include "workloads/workload.h"

namespace kvsim {

namespace fs = std::filesystem;

namespace {

// The node at a dotted key path ("workload.arrivals.rate", "policies.0.name"); undefined if absent.
YAML::Node node_at(const YAML::Node& root, const std::string& key) {
  YAML::Node n = YAML::Clone(root);
  std::stringstream ss(key);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (n.IsMap() && n[part]) {
      n = n[part];
    } else if (n.IsSequence() && !part.empty() &&
               std::all_of(part.begin(), part.end(), ::isdigit) && std::stoul(part) < n.size()) {
      n = n[std::stoul(part)];
    } else {
      return YAML::Node(YAML::NodeType::Undefined);
    }
  }
  return n;
}

std::string first_policy(const YAML::Node& tree, const std::string& source) {
  const YAML::Node ps = tree["policies"];
  if (!ps || !ps.IsSequence() || ps.size() == 0 || !ps[0].IsMap() || !ps[0]["name"]) {
    throw InputError(fmt::format("{}: capacity needs a scenario with named policies", source));
  }
  return ps[0]["name"].as<std::string>();
}

// The policy object of a finished point's summary.json.
nlohmann::json point_policy(const fs::path& dir, const std::string& policy) {
  std::ifstream in(dir / "summary.json");
  if (!in) throw InputError(fmt::format("{}: no summary.json", dir.string()));
  const nlohmann::json j = nlohmann::json::parse(in);
  for (const auto& p : j.at("policies")) {
    if (p.at("name") == policy) return p;
  }
  throw InputError(fmt::format("{}: no policy named '{}'", dir.string(), policy));
}

// The criterion's figures of one policy object (NaN where absent).
std::vector<double> figures_of(const CapacityCriterion& c, const nlohmann::json& p) {
  std::vector<double> out;
  for (const auto& b : c.bounds) {
    const auto& j = p.at(b.metric);
    if (b.stat.empty()) {
      out.push_back(j.is_null() ? std::nan("") : j.get<double>());
    } else {
      out.push_back(j.at("count").get<int64_t>() == 0 ? std::nan("") : j.at(b.stat).get<double>());
    }
  }
  return out;
}

// A sweep over `grid` of `base`, run into `dir`.
struct Points {
  SweepPlan plan;
  SweepReport report;
};
Points run_grid(const YAML::Node& base, const CapacityWritten& w,
                const std::vector<CapacityAxis>& grid, bool search, const fs::path& dir,
                const CapacityOptions& o, const Catalog& catalog, bool run) {
  Points p{.plan = expand_sweep(capacity_grid_scenario(base, w, grid, search))};
  if (run) {
    SweepOptions so = o.sweep;
    so.out_dir = dir;
    so.shard_index = 0;
    so.shard_count = 1;
    p.report = run_sweep(p.plan, catalog, so);
  }
  return p;
}

std::string value_text(double v, bool integer) {
  return integer ? fmt::format("{}", static_cast<int64_t>(std::llround(v)))
                 : fmt::format("{:.6g}", v);
}

// How far a search strays from the scenario's value before it gives up: 2^20 times above it, or
// 2^-10 below it (probes ever slower to simulate: a tenth of the rate is ten times the span).
constexpr double kMaxGrowth = 1 << 20;
constexpr double kMaxShrink = 1 << 10;

// Why the scenario refuses `value` for the search key ("" when it takes it): a value the search
// makes up (a doubled rate) may be outside the key's range. Loading the point and its workload
// finds it without running it.
std::string refuses(const YAML::Node& tree, const CapacityWritten& w, const std::string& key,
                    const std::string& value, const Catalog& catalog) {
  try {
    const SweepPlan plan = expand_sweep(
        capacity_grid_scenario(tree, w, {CapacityAxis{.key = key, .values = {value}}}, true));
    const Scenario sc = load_scenario(plan.points.config(plan.points[0]), catalog);
    if (auto wl = sc.root.optional_child("workload")) (void)make_workload(*wl, sc.seed);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// One configuration's search (see the header).
void search(CapacityConfig& c, const YAML::Node& tree, const CapacityWritten& w,
            const fs::path& dir, const CapacityOptions& o, const Catalog& catalog,
            CapacityReport& rep) {
  const YAML::Node start = node_at(tree, o.search_key);
  if (!start.IsDefined() || !start.IsScalar()) {
    throw InputError(
        fmt::format("--search {}: the scenario has no such number (give the key a "
                    "starting value in the scenario)",
                    o.search_key));
  }
  double v0 = 0;
  const bool integer = o.integer;
  try {
    v0 = std::stod(start.Scalar());
  } catch (const std::exception&) {
    throw InputError(
        fmt::format("--search {}: '{}' is not a number", o.search_key, start.Scalar()));
  }
  if (!(v0 > 0))
    throw InputError(fmt::format("--search {}: the starting value must be > 0", o.search_key));
  rep.load = v0;
  const int jobs = std::max(1, std::min(o.sweep.jobs, 16));
  double ok = 0, bad = 0;  // the bracket: largest value that met, smallest that failed (0: none)
  std::vector<double> tried;
  std::string refused;  // why the scenario refused a value beyond the bracket ("" if none)
  for (int round = 0; round < o.max_rounds; ++round) {
    if (ok > 0 && bad > 0) {
      if (bad - ok <= (integer ? 1.0 : o.tolerance * bad)) break;
    }
    std::vector<double> cand;
    for (int k = 0; k < jobs; ++k) {
      double v;
      if (ok == 0 && bad == 0)
        v = v0 * std::pow(2.0, k);
      else if (bad == 0)
        v = ok * std::pow(2.0, k + 1);
      else if (ok == 0)
        v = bad / std::pow(2.0, k + 1);
      else
        v = ok + (bad - ok) * (k + 1) / (jobs + 1);
      v = std::stod(value_text(v, integer));
      if (integer && v < 1) continue;
      if (bad == 0 && v > v0 * kMaxGrowth * (1 + 1e-6)) continue;  // 6-digit rounding
      if (ok == 0 && v < v0 / kMaxShrink * (1 - 1e-6)) continue;
      if (v != v0 && bad * ok == 0) {  // beyond the bracket: a value the search made up
        if (const std::string why = refuses(tree, w, o.search_key, value_text(v, integer), catalog);
            !why.empty()) {
          refused = why;
          continue;
        }
      }
      if (std::find(tried.begin(), tried.end(), v) != tried.end()) continue;
      if (std::find(cand.begin(), cand.end(), v) != cand.end()) continue;
      cand.push_back(v);
    }
    if (cand.empty()) break;  // the bracket holds no new value (integer keys)
    std::sort(cand.begin(), cand.end());
    CapacityAxis axis{.key = o.search_key};
    for (double v : cand) axis.values.push_back(value_text(v, integer));
    const fs::path rdir = dir / fmt::format("round-{:02d}", round);
    const Points pts = run_grid(tree, w, {axis}, true, rdir, o, catalog, true);
    rep.points_run += pts.report.points_run;
    rep.points_skipped += pts.report.points_skipped;
    for (size_t i = 0; i < cand.size(); ++i) {
      const nlohmann::json p = point_policy(rdir / "points" / pts.plan.points.name(i), rep.policy);
      CapacityProbe probe{.value = cand[i]};
      probe.met = o.criterion.met(p, &probe.why);
      tried.push_back(cand[i]);
      c.probes.push_back(probe);
      if (probe.met && cand[i] > ok && (bad == 0 || cand[i] < bad)) {
        ok = cand[i];
        c.figures = figures_of(o.criterion, p);
      }
      if (!probe.met && (bad == 0 || cand[i] < bad)) bad = cand[i];
    }
    // A pass above a failure (the SLO is not monotone there): keep the bracket under the failure.
    if (bad > 0 && ok >= bad) {
      ok = 0;
      for (const CapacityProbe& p : c.probes) {
        if (p.met && p.value < bad && p.value > ok) ok = p.value;
      }
    }
  }
  c.max_load = ok;
  c.fail_load = bad;
  c.met = ok >= v0;
  // A search with one side of the bracket only found no answer: say which, in terms of the load
  // (never the scenario's range error for a value the search made up).
  if (bad * ok == 0 && !c.probes.empty()) {
    const std::string beyond = refused.empty() ? "" : fmt::format(" (beyond it: {})", refused);
    if (bad > 0) {
      const auto lowest = std::find_if(c.probes.begin(), c.probes.end(),
                                       [&](const CapacityProbe& p) { return p.value == bad; });
      c.why = fmt::format("no load meets the SLO: at the lowest {} tried, {}, {}{}", o.search_key,
                          value_text(bad, integer), lowest->why, beyond);
    } else {
      c.why = fmt::format("every load tried meets the SLO, up to {} = {}{}", o.search_key,
                          value_text(ok, integer), beyond);
    }
  }
}

}  // namespace

CapacityAxis parse_capacity_axis(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    throw InputError(fmt::format("--over '{}': expected KEY=a,b,c or KEY=lo..hi", text));
  }
  CapacityAxis a{.key = text.substr(0, eq), .values = {}, .text = text};
  const std::string rhs = text.substr(eq + 1);
  if (const auto dots = rhs.find(".."); dots != std::string::npos) {
    try {
      size_t n1 = 0, n2 = 0;
      const long long lo = std::stoll(rhs.substr(0, dots), &n1);
      const long long hi = std::stoll(rhs.substr(dots + 2), &n2);
      if (n1 != dots || n2 != rhs.size() - dots - 2 || lo > hi || hi - lo >= 4096) throw 0;
      for (long long v = lo; v <= hi; ++v) a.values.push_back(std::to_string(v));
    } catch (...) {
      throw InputError(
          fmt::format("--over '{}': expected integers lo..hi (lo <= hi, at most "
                      "4096 values)",
                      text));
    }
    return a;
  }
  std::stringstream ss(rhs);
  std::string v;
  while (std::getline(ss, v, ',')) {
    if (v.empty()) throw InputError(fmt::format("--over '{}': an empty value", text));
    a.values.push_back(v);
  }
  return a;
}

namespace {

CapacityReport run_capacity_into(const CapacityOptions& o, const Catalog& catalog) {
  if (o.scenario["sweep"]) {
    throw InputError(
        fmt::format("{}: capacity runs its own points; remove the `sweep:` block", o.source));
  }
  CapacityReport rep;
  rep.policy = o.policy.empty() ? first_policy(o.scenario, o.source) : o.policy;
  rep.search_key = o.search_key;
  rep.criterion = o.criterion;
  for (const CapacityAxis& a : o.over) rep.over_keys.push_back(a.key);
  const fs::path out = o.sweep.out_dir;

  // The configurations: the --over grid (one configuration, the scenario, without --over).
  struct Cfg {
    std::vector<std::string> values;
    std::string name;
    YAML::Node tree;
  };
  // A configuration's values: the scenario's, the --over values at their keys.
  CapacityWritten w{.marks = ConfigNode::wrap_with_sets(o.scenario, o.source, o.sets).marks()};
  std::vector<Cfg> cfgs;
  if (o.over.empty()) {
    cfgs.push_back({.tree = YAML::Clone(o.scenario)});
  } else {
    const bool run_now = o.search_key.empty();  // fixed load: the grid is the whole run
    const Points pts = run_grid(o.scenario, w, o.over, false, out, o, catalog, run_now);
    for (const CapacityAxis& a : o.over) {
      w.by.emplace_back(ConfigNode::key_path(a.key), capacity_axis_label(a, false));
    }
    rep.points_run += pts.report.points_run;
    rep.points_skipped += pts.report.points_skipped;
    for (size_t i = 0; i < pts.plan.points.size(); ++i) {
      const SweepPoint p = pts.plan.points[i];
      cfgs.push_back({.values = p.values, .name = p.name, .tree = p.tree});
    }
  }
  for (const Cfg& cf : cfgs) {
    CapacityConfig c{.values = cf.values, .name = cf.name};
    // Wrapped with the scenario's marks, so that a bad `cost:` value names its file:line:col.
    c.cost = config_cost(ConfigNode::wrap_copy(YAML::Clone(cf.tree), w.marks, w.by), rep.policy,
                         catalog);
    if (o.search_key.empty()) {
      if (o.over.empty()) {
        const Points pts = run_grid(cf.tree, w, {}, false, out, o, catalog, true);
        rep.points_run += pts.report.points_run;
        rep.points_skipped += pts.report.points_skipped;
        const nlohmann::json p = point_policy(out / "points" / pts.plan.points.name(0), rep.policy);
        c.met = o.criterion.met(p, &c.why);
        c.figures = figures_of(o.criterion, p);
      } else {
        const nlohmann::json p = point_policy(out / "points" / cf.name, rep.policy);
        c.met = o.criterion.met(p, &c.why);
        c.figures = figures_of(o.criterion, p);
      }
    } else {
      search(c, cf.tree, w, cf.name.empty() ? out / "search" : out / "search" / cf.name, o, catalog,
             rep);
      // One configuration: a search without an answer is the run's answer, one line.
      if (o.over.empty() && !c.why.empty()) throw InputError(c.why);
    }
    if (c.figures.empty()) c.figures.assign(o.criterion.bounds.size(), std::nan(""));
    rep.configs.push_back(std::move(c));
  }
  // The cheapest priced configuration serving the scenario's load; among equal costs the one
  // with the most headroom (largest attainable load, with --search), then the first in grid order.
  for (size_t i = 0; i < rep.configs.size(); ++i) {
    const CapacityConfig& c = rep.configs[i];
    if (!c.cost.priced()) rep.unpriced.push_back(static_cast<int>(i));
    if (!c.met || !c.cost.priced()) continue;
    const CapacityConfig* best = rep.cheapest < 0 ? nullptr : &rep.configs[rep.cheapest];
    if (!best || c.cost.cost_per_hour_usd() < best->cost.cost_per_hour_usd() ||
        (c.cost.cost_per_hour_usd() == best->cost.cost_per_hour_usd() &&
         c.max_load > best->max_load)) {
      rep.cheapest = static_cast<int>(i);
    }
  }
  // Pareto front of the priced configurations: no other attains at least as much load for less,
  // or more load for the same cost.
  if (!o.search_key.empty()) {
    for (CapacityConfig& c : rep.configs) {
      if (c.max_load <= 0 || !c.cost.priced()) continue;
      c.pareto = std::none_of(rep.configs.begin(), rep.configs.end(), [&](const CapacityConfig& d) {
        const double dc = d.cost.cost_per_hour_usd(), cc = c.cost.cost_per_hour_usd();
        return &d != &c && d.max_load > 0 && d.cost.priced() &&
               ((dc < cc && d.max_load >= c.max_load) || (dc <= cc && d.max_load > c.max_load));
      });
    }
  }
  return rep;
}

}  // namespace

CapacityReport run_capacity(const CapacityOptions& o, const Catalog& catalog) {
  const fs::path out = o.sweep.out_dir;
  std::error_code ec;
  const bool existed = fs::exists(out, ec);
  try {
    return run_capacity_into(o, catalog);
  } catch (const InputError& e) {
    // A folder this run made holds nothing worth keeping: remove it. One that was there (a resume)
    // keeps its probes, finished ones included, and the message says so.
    if (!existed) {
      fs::remove_all(out, ec);
      throw;
    }
    throw InputError(
        fmt::format("{} (the probes run so far stay in {}/ for a resume)", e.what(), out.string()));
  }
}

namespace {

std::string num(double v) { return std::isnan(v) ? "" : fmt::format("{:.6g}", v); }

}  // namespace

std::string capacity_csv(const CapacityReport& r) {
  std::string out = "config";
  for (const std::string& k : r.over_keys) out += "," + k;
  out += ",priced_gpu,gpus,gpu_hour_usd,cost_per_hour_usd";  // priced_gpu: never clashes with a
                                                             // --over gpu column
  if (!r.search_key.empty()) out += ",max_load,fail_load,probes";
  out += ",meets_slo";
  for (const auto& b : r.criterion.bounds) out += "," + b.text.substr(0, b.text.find('='));
  out += !r.search_key.empty() ? ",pareto,cheapest\n" : ",cheapest\n";
  for (size_t i = 0; i < r.configs.size(); ++i) {
    const CapacityConfig& c = r.configs[i];
    out += c.name;
    for (const std::string& v : c.values) out += "," + v;
    out += fmt::format(",{},{},{},{}", c.cost.gpu, c.cost.gpus, num(c.cost.gpu_hour_usd),
                       num(c.cost.cost_per_hour_usd()));
    if (!r.search_key.empty()) {
      out += fmt::format(",{},{},{}", num(c.max_load), c.fail_load > 0 ? num(c.fail_load) : "",
                         c.probes.size());
    }
    out += c.met ? ",true" : ",false";
    for (double f : c.figures) {  // piece by piece: `"," + temporary` trips GCC 12's -Wrestrict
      out += ',';
      out += num(f);
    }
    if (!r.search_key.empty()) out += c.pareto ? ",true" : ",false";
    out += static_cast<int>(i) == r.cheapest ? ",true\n" : ",false\n";
  }
  return out;
}

std::string capacity_table(const CapacityReport& r) {
  std::vector<std::string> h = r.over_keys;
  for (const char* k : {"GPUs", "$/h"}) h.emplace_back(k);
  const bool s = !r.search_key.empty();
  if (s) {
    h.emplace_back("max " + r.search_key);
    h.emplace_back("fails at");
    h.emplace_back("probes");
  }
  h.emplace_back(s ? fmt::format("serves {:g}", r.load) : "meets SLO");
  for (const auto& b : r.criterion.bounds) h.push_back(b.text.substr(0, b.text.find('=')));
  if (s && !r.over_keys.empty()) h.emplace_back("pareto");
  if (!s) h.emplace_back("missed");  // the first bound a configuration missed
  cli::TextTable t(h);
  for (size_t i = 0; i < r.configs.size(); ++i) {
    const CapacityConfig& c = r.configs[i];
    std::vector<std::string> row = c.values;
    row.push_back(std::to_string(c.cost.gpus));
    row.push_back(c.cost.priced() ? fmt::format("{:.2f}", c.cost.cost_per_hour_usd()) : "unpriced");
    if (s) {
      row.push_back(c.max_load > 0 ? num(c.max_load) : "none");
      row.push_back(c.fail_load > 0 ? num(c.fail_load) : "-");
      row.push_back(std::to_string(c.probes.size()));
    }
    std::string met = c.met ? "yes" : "no";
    if (static_cast<int>(i) == r.cheapest && r.configs.size() > 1) met += " (cheapest)";
    row.push_back(met);
    for (double f : c.figures) row.push_back(std::isnan(f) ? "-" : fmt::format("{:.4g}", f));
    if (s && !r.over_keys.empty()) row.push_back(c.pareto ? "*" : "");
    if (!s) row.push_back(c.met ? "" : c.why);
    t.add_row(row);
  }
  return t.render();
}

}  // namespace kvsim
