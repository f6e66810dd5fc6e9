// `kvsim-validate compare DIR --profile P`: predicts every held-out (split "test") measurement
// with the simulator's latency model under profile P and reports the error per kernel class:
// compare.csv (one row per point), compare.json ({mape, by_class, ...}) and a terminal table
// with each class's worst case.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/text_table.h"
#include "models/latency/profile.h"
#include "validate/commands.h"
#include "validate/kernel_model.h"

namespace kvsim::validate {

namespace {

struct Point {
  const Measurement* m;
  double predicted;
  double abs_pct;  // |predicted - measured| / measured
};

}  // namespace

double run_compare(const CompareOptions& o) {
  const std::vector<Measurement> rows = read_measurements(o.dir / "measurements.csv");
  const GpuSpec gpu = manifest_gpu(o.dir);
  const Profile profile = load_profile(o.profile);
  std::map<std::string, std::vector<Point>> by_class;
  std::vector<Point> all;
  const KernelPredictor predictor(gpu, profile);
  for (const Measurement& m : rows) {
    if (m.c.split != "test" || !m.timed()) continue;
    const auto pred = predictor.seconds(m.c);
    if (!pred) continue;
    const Point p{&m, *pred, std::abs(*pred - m.seconds) / m.seconds};
    by_class[std::string(class_name(m.c.kind))].push_back(p);
    all.push_back(p);
  }
  if (all.empty()) {
    throw InputError(fmt::format("{}: no timed test rows of a modelled kernel class to compare",
                                 (o.dir / "measurements.csv").string()));
  }
  auto mape = [](const std::vector<Point>& v) {
    double s = 0;
    for (const Point& p : v) s += p.abs_pct;
    return s / static_cast<double>(v.size());
  };
  const std::filesystem::path out = o.out_dir.empty() ? o.dir : o.out_dir;
  std::string csv = "kernel,case,measured_s,predicted_s,error_pct\n";
  for (const Point& p : all) {
    csv +=
        fmt::format("{},\"{}\",{:.9g},{:.9g},{:.3f}\n", class_name(p.m->c.kind), p.m->c.describe(),
                    p.m->seconds, p.predicted, 100.0 * (p.predicted - p.m->seconds) / p.m->seconds);
  }
  nlohmann::ordered_json j;
  const double overall = mape(all);
  j["mape"] = overall;
  j["by_class"] = nlohmann::ordered_json::object();
  for (const auto& [c, v] : by_class) j["by_class"][c] = mape(v);
  j["points"] = all.size();
  j["profile"] = o.profile.string();
  j["gpu"] = gpu.name;
  j["worst"] = nlohmann::ordered_json::object();
  cli::TextTable t(
      {"class", "test points", "MAPE", "worst case", "measured", "predicted", "error"});
  for (const auto& [c, v] : by_class) {
    const Point& w = *std::max_element(
        v.begin(), v.end(), [](const Point& a, const Point& b) { return a.abs_pct < b.abs_pct; });
    j["worst"][c] = {{"case", w.m->c.describe()},
                     {"measured_s", w.m->seconds},
                     {"predicted_s", w.predicted},
                     {"abs_error", w.abs_pct}};
    t.add_row({c, std::to_string(v.size()), fmt::format("{:.1f}%", mape(v) * 100),
               w.m->c.describe(), fmt::format("{:.3f} us", w.m->seconds * 1e6),
               fmt::format("{:.3f} us", w.predicted * 1e6),
               fmt::format("{:+.1f}%", 100.0 * (w.predicted - w.m->seconds) / w.m->seconds)});
  }
  write_file_atomic(out / "compare.csv", csv);
  write_file_atomic(out / "compare.json", j.dump(2) + "\n");
  if (!o.quiet) {
    fmt::print(
        "compare: {} held-out points, profile {} on {}; overall MAPE {:.1f}%\n{}wrote {} and {}\n",
        all.size(), profile.name, gpu.name, overall * 100, t.render(),
        (out / "compare.csv").string(), (out / "compare.json").string());
  }
  return overall;
}

}  // namespace kvsim::validate
