// `kvsim-validate measure`: every case of a grid is checked against its reference (when small
// enough) and timed; the rows go to measurements.csv, the run's context to manifest.json.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>

#include "core/atomic_file.h"
#include "core/data_path.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "validate/backend.h"
#include "validate/commands.h"

namespace kvsim::validate {

namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// The catalog GPU a CUDA device is: an exact display name, else the catalog key whose family
// ("h100", "a100", ...) appears in the device name and whose memory is closest to the device's.
std::optional<GpuSpec> match_catalog(const std::string& device, int64_t total_bytes) {
  const Catalog& cat = Catalog::builtin();
  const std::string dev = lower(device);
  const GpuSpec* best = nullptr;
  for (const auto& [key, g] : cat.gpus()) {
    if (lower(g.display_name) == dev || "nvidia " + key == dev) return g;
    const std::string family = key.substr(0, key.find('-'));
    if (dev.find(family) == std::string::npos) continue;
    auto gap = [&](const GpuSpec& x) {
      return std::abs(static_cast<double>(x.memory_bytes - total_bytes));
    };
    if (!best || gap(g) < gap(*best)) best = &g;
  }
  if (best) return *best;
  return std::nullopt;
}

// Peaks for a device the catalog does not know (and for the CPU backend): 1.25x the best rate the
// run itself achieved, so every fitted efficiency stays below 1. Nominal, not a datasheet figure.
GpuSpec nominal_spec(const std::string& name, const std::vector<Measurement>& rows) {
  double flops = 0, bw = 0, any_bw = 0;
  for (const Measurement& m : rows) {
    if (!m.timed()) continue;
    flops = std::max(flops, m.flop_per_s());
    any_bw = std::max(any_bw, m.bytes_per_s());
    if (m.c.kind == KernelClass::kMembwCopy || m.c.kind == KernelClass::kMembwRead) {
      bw = std::max(bw, m.bytes_per_s());
    }
  }
  GpuSpec g;
  g.name = name;
  g.display_name = name;
  g.source = "nominal: 1.25 x the best rates measured in this run (no datasheet figures)";
  g.fp16_flops = 1.25 * (flops > 0 ? flops : 1e9);
  g.hbm_bytes_per_s = 1.25 * std::max(bw, any_bw > 0 ? any_bw : 1e9);
  return g;
}

nlohmann::ordered_json spec_json(const GpuSpec& g, const std::string& from) {
  nlohmann::ordered_json j;
  j["name"] = g.name;
  j["display_name"] = g.display_name;
  j["from"] = from;
  j["fp16_flops"] = g.fp16_flops;
  j["hbm_bytes_per_s"] = g.hbm_bytes_per_s;
  j["memory_bytes"] = g.memory_bytes;
  j["source"] = g.source;
  return j;
}

std::string rate(double v, const char* unit) {
  if (v >= 1e12) return fmt::format("{:.1f} T{}", v / 1e12, unit);
  if (v >= 1e9) return fmt::format("{:.1f} G{}", v / 1e9, unit);
  return fmt::format("{:.1f} M{}", v / 1e6, unit);
}

Measurement measure_case(Backend& backend, const Grid& g, size_t index, int& failed) {
  Measurement m;
  m.c = g.cases[index];
  const uint64_t seed = g.seed * 1000003 + index;
  try {
    if (m.c.check) {
      const kernels::CheckReport r = check_case(backend, m.c, seed);
      m.check = r.passed ? "pass" : "fail";
      m.max_abs_error = r.max_abs_error;
      m.max_rel_error = r.max_rel_error;
      if (!r.passed) {
        ++failed;
        fmt::print(stderr, "kvsim-validate: correctness check failed: {}\n",
                   r.summary(m.c.describe(), ""));
      }
    }
    const std::vector<double> s = backend.time(m.c, g.timing, seed);
    m.reps = static_cast<int>(s.size());
    m.seconds = percentile(s, 50);
    m.seconds_min = percentile(s, 0);
    m.seconds_p10 = percentile(s, 10);
    m.seconds_p90 = percentile(s, 90);
  } catch (const SkipCase& e) {
    m.skipped = e.what();
  }
  return m;
}

}  // namespace

int run_measure(const MeasureOptions& o) {
  auto backend = make_backend(o.backend);
  const Grid g = load_grid(o.grid, backend->name());
  if (!o.quiet) {
    fmt::print("measure: grid {} ({} cases) on {} backend: {}\n", g.name, g.cases.size(),
               backend->name(), backend->device_name());
    std::fflush(stdout);
  }
  std::vector<Measurement> rows;
  int failed = 0;
  for (size_t i = 0; i < g.cases.size(); ++i) {
    rows.push_back(measure_case(*backend, g, i, failed));
    const Measurement& m = rows.back();
    if (o.quiet) continue;
    if (!m.skipped.empty()) {
      fmt::print("[{}/{}] {}: skipped ({})\n", i + 1, g.cases.size(), m.c.describe(), m.skipped);
    } else {
      fmt::print("[{}/{}] {}: {:.3f} us median, spread {:.1f}%, {}, {}{}\n", i + 1, g.cases.size(),
                 m.c.describe(), m.seconds * 1e6, m.spread() * 100, rate(m.flop_per_s(), "FLOP/s"),
                 rate(m.bytes_per_s(), "B/s"), m.check == "-" ? "" : ", check " + m.check);
    }
    std::fflush(stdout);
  }

  GpuSpec spec;
  std::string from = "catalog";
  const nlohmann::ordered_json dev = backend->device_json();
  if (!o.gpu.empty()) {
    spec = Catalog::builtin().gpu(o.gpu);
  } else if (auto hit =
                 backend->name() == "cuda"
                     ? match_catalog(backend->device_name(), dev.value("total_bytes", int64_t{0}))
                     : std::nullopt) {
    spec = *hit;
  } else {
    spec = nominal_spec(backend->name() == "cpu" ? "cpu-host" : backend->device_name(), rows);
    from = "nominal";
  }

  nlohmann::ordered_json man;
  man["tool"] = "kvsim-validate measure";
  man["kvsim_version"] = kvsim_version();
  man["grid"] = {{"name", g.name},
                 {"file", o.grid.string()},
                 {"seed", g.seed},
                 {"warmup", g.timing.warmup},
                 {"repetitions", g.timing.repetitions},
                 {"flush_l2", backend->name() == "cuda" && g.timing.flush_l2},
                 {"check_max_flops", g.check_max_flops},
                 {"check_max_bytes", g.check_max_bytes},
                 {"holdout_every", g.holdout_every}};
  man["backend"] = backend->name();
  man["device"] = dev;
  man["gpu_spec"] = spec_json(spec, from);
  int timed = 0, skipped = 0, checked = 0;
  for (const Measurement& m : rows) {
    timed += m.timed() ? 1 : 0;
    skipped += m.skipped.empty() ? 0 : 1;
    checked += m.check == "-" ? 0 : 1;
  }
  man["cases"] = rows.size();
  man["timed"] = timed;
  man["skipped"] = skipped;
  man["checks"] = {{"run", checked}, {"failed", failed}};
  write_file_atomic(o.out_dir / "measurements.csv", measurements_csv(rows));
  write_file_atomic(o.out_dir / "manifest.json", man.dump(2) + "\n");
  if (!o.quiet) {
    fmt::print(
        "measure: {} timed, {} skipped, {} checked ({} failed); peaks from {} ({}): "
        "{:.4g} FLOP/s, {:.4g} B/s\nwrote {}\n",
        timed, skipped, checked, failed, from, spec.name, spec.fp16_flops, spec.hbm_bytes_per_s,
        (o.out_dir / "measurements.csv").string());
  }
  return failed;
}

GpuSpec manifest_gpu(const std::filesystem::path& dir) {
  const auto path = dir / "manifest.json";
  std::ifstream in(path);
  if (!in)
    throw InputError(fmt::format("{}: cannot open (is {} a measure output folder?)", path.string(),
                                 dir.string()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
    const auto& s = j.at("gpu_spec");
    if (s.at("from").get<std::string>() == "catalog") {
      return Catalog::builtin().gpu(s.at("name").get<std::string>());
    }
    GpuSpec g;
    g.name = s.at("name").get<std::string>();
    g.display_name = s.at("display_name").get<std::string>();
    g.source = s.at("source").get<std::string>();
    g.fp16_flops = s.at("fp16_flops").get<double>();
    g.hbm_bytes_per_s = s.at("hbm_bytes_per_s").get<double>();
    g.memory_bytes = s.at("memory_bytes").get<int64_t>();
    if (!(g.fp16_flops > 0) || !(g.hbm_bytes_per_s > 0)) throw InputError("peaks must be > 0");
    return g;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(
        fmt::format("{}: not a kvsim-validate manifest ({})", path.string(), e.what()));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: gpu_spec: {}", path.string(), e.what()));
  }
}

}  // namespace kvsim::validate
