// `kvsim-validate calibrate DIR -o profile.yaml`: fits the latency profile on DIR's train split
// (validate/fit_profile.h) and writes it with the latency model's own writer, so `kvsim latency
// --profile` and the simulator load it unchanged. The residuals go to DIR/fit_residuals.csv and
// a table on stdout.
#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/text_table.h"
#include "models/latency/profile.h"
#include "validate/commands.h"
#include "validate/fit_profile.h"

namespace kvsim::validate {

void run_calibrate(const CalibrateOptions& o) {
  const std::vector<Measurement> rows = read_measurements(o.dir / "measurements.csv");
  const GpuSpec gpu = manifest_gpu(o.dir);
  const bool nominal = gpu.source.rfind("nominal", 0) == 0;
  const std::string provenance = fmt::format("kvsim-validate calibrate from {}", o.dir.string());
  const FitResult fit = fit_profile(rows, gpu, default_profile(gpu), provenance);
  if (fit.classes.empty()) {
    throw InputError(fmt::format("{}: no timed train rows of a modelled kernel class to fit",
                                 (o.dir / "measurements.csv").string()));
  }
  Profile p = fit.profile;
  p.name = gpu.name + "-calibrated";
  // A profile from nominal peaks is only meaningful relative to those peaks: it names no catalog
  // GPU ("any"), and its source says so.
  p.gpu = nominal ? "" : gpu.name;
  p.source = fmt::format("{}; peaks {:.6g} FLOP/s and {:.6g} B/s from {}", provenance,
                         gpu.fp16_flops, gpu.hbm_bytes_per_s,
                         nominal ? gpu.source : "the kvsim catalog entry " + gpu.name);
  write_file_atomic(o.profile, write_profile_yaml(p));

  std::string csv = "kernel,case,split,measured_s,predicted_s,rel_error\n";
  for (const Residual& r : fit.residuals) {
    csv += fmt::format("{},\"{}\",train,{:.9g},{:.9g},{:.6f}\n", class_name(r.m->c.kind),
                       r.m->c.describe(), r.m->seconds, r.predicted, r.rel_error);
  }
  write_file_atomic(o.dir / "fit_residuals.csv", csv);
  if (o.quiet) return;
  cli::TextTable t({"class", "train points", "rms rel resid", "mean |rel|", "max |rel|", "fitted",
                    "kept (defaults)"});
  for (const ClassFit& c : fit.classes) {
    auto join = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
      return s.empty() ? std::string("-") : s;
    };
    t.add_row({std::string(op_class_name(c.op_class)), std::to_string(c.train_points),
               fmt::format("{:.2f}%", c.rms_rel * 100), fmt::format("{:.2f}%", c.mape * 100),
               fmt::format("{:.2f}%", c.max_rel * 100), join(c.fitted), join(c.kept)});
  }
  fmt::print("calibrate: {} train rows, peaks of {}{}\n{}wrote {} and {}\n", fit.residuals.size(),
             gpu.name, nominal ? " (nominal: 1.25x the best measured rates)" : "", t.render(),
             o.profile.string(), (o.dir / "fit_residuals.csv").string());
}

}  // namespace kvsim::validate
