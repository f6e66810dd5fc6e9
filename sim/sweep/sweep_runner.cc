#include "sim/sweep/sweep_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "sim/config/scenario.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/data_path.h"
#include "core/errors.h"

namespace kvsim {

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("cannot read {}", path.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// What every shard writes identically: enough to check that folders belong together and to
// name every point without re-reading the scenario; the version and the hash of the scenario as
// given head the report, and `axes` tells the plots which keys move together (a zip is one axis).
nlohmann::ordered_json sweep_index(const SweepPlan& plan,
                                   const std::map<size_t, std::string>& hashes) {
  nlohmann::ordered_json j;
  j["kvsim_version"] = kvsim_version();
  j["scenario_source"] = plan.source;
  j["scenario_hash"] = scenario_hash(plan.scenario);
  j["keys"] = plan.keys;
  j["axes"] = plan.axes;
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const SweepPoint& p : plan.points) {
    points.push_back({{"index", p.index},
                      {"name", p.name},
                      {"values", p.values},
                      {"scenario_hash", hashes.at(p.index)}});
  }
  j["points"] = std::move(points);
  return j;
}

// True when `dir` holds a finished run of the scenario with `hash`. A folder holding a finished
// run of something else is an error: silently mixing two sweeps' results would be worse.
bool point_complete(const fs::path& dir, const std::string& hash) {
  const fs::path manifest = dir / "manifest.json";
  if (!fs::exists(manifest)) return false;
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(read_file(manifest));
  } catch (const nlohmann::json::exception&) {
    return false;  // written atomically, so only a foreign file; run the point again
  }
  if (m.value("scenario_hash", "") != hash) {
    throw InputError(
        fmt::format("{} holds a finished run of a different scenario; sweep into a "
                    "fresh folder",
                    dir.string()));
  }
  return true;
}

class Progress {
 public:
  Progress(bool on, size_t total) : on_(on), total_(total), start_(Clock::now()) {}
  void done_one() {
    if (!on_) return;
    std::lock_guard lock(mu_);
    ++done_;
    const double s = std::chrono::duration<double>(Clock::now() - start_).count();
    const double rate = s > 0 ? static_cast<double>(done_) / s : 0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0;
    constexpr size_t kWidth = 30;
    const size_t filled = total_ ? done_ * kWidth / total_ : kWidth;
    fmt::print(stderr, "\r[{}{}] {}/{} points  {:.2f}/s  ETA {:.0f}s ", std::string(filled, '#'),
               std::string(kWidth - filled, ' '), done_, total_, rate, eta);
    if (done_ == total_) fmt::print(stderr, "\n");
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_;
  size_t total_;
  size_t done_ = 0;
  Clock::time_point start_;
  std::mutex mu_;
};

std::string point_label(const SweepPlan& plan, const SweepPoint& p) {
  std::string label;
  for (size_t k = 0; k < plan.keys.size(); ++k) {
    label += fmt::format("{}{}={}", k ? ", " : "", plan.keys[k], p.values[k]);
  }
  return fmt::format("sweep point {} ({})", p.index, label);
}

// Re-throws `e` with the point named, keeping its kind (the exit code depends on it).
[[noreturn]] void rethrow_with_point(std::exception_ptr e, const std::string& label) {
  try {
    std::rethrow_exception(e);
  } catch (const ConfigError& x) {
    throw ConfigError(fmt::format("{}: {}", label, x.what()));
  } catch (const InputError& x) {
    throw InputError(fmt::format("{}: {}", label, x.what()));
  } catch (const InvariantError& x) {
    throw InvariantError(fmt::format("{}: {}", label, x.what()));
  } catch (const std::exception& x) {
    throw std::runtime_error(fmt::format("{}: {}", label, x.what()));
  }
}

}  // namespace

void parse_shard(const std::string& text, int& index, int& count) {
  int i = -1, n = 0;
  char slash = 0;
  std::istringstream in(text);
  in >> i >> slash >> n;
  if (!in || slash != '/' || !in.eof() || n < 1 || i < 0 || i >= n) {
    throw InputError(fmt::format("--shard '{}': expected i/n with 0 <= i < n, e.g. 0/4", text));
  }
  index = i;
  count = n;
}

SweepReport run_sweep(const SweepPlan& plan, const Catalog& catalog, const SweepOptions& o) {
  SweepReport report;
  report.points_total = plan.points.size();
  // Every point's top level is checked before anything runs: a bad value fails in seconds, not
  // after hours of the points before it.
  std::vector<const SweepPoint*> mine;
  for (const SweepPoint& p : plan.points) {
    try {
      load_scenario(ConfigNode::wrap(p.tree, plan.source), catalog);
    } catch (...) {
      rethrow_with_point(std::current_exception(), point_label(plan, p));
    }
    if (static_cast<int>(p.index % static_cast<size_t>(o.shard_count)) == o.shard_index)
      mine.push_back(&p);
  }
  report.points_mine = mine.size();
  std::map<size_t, std::string> hashes;  // each point's scenario_hash, computed once
  for (const SweepPoint& p : plan.points) hashes[p.index] = scenario_hash(p.tree);
  fs::create_directories(o.out_dir / "points");
  write_file_atomic(o.out_dir / "sweep.json", sweep_index(plan, hashes).dump(2) + "\n");

  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::atomic<size_t> ran{0}, skipped{0};
  std::mutex error_mu;
  size_t error_index = SIZE_MAX;
  std::exception_ptr error;
  Progress progress(o.progress, mine.size());
  auto worker = [&] {
    while (!failed) {
      const size_t i = next++;
      if (i >= mine.size()) return;
      const SweepPoint& p = *mine[i];
      const fs::path dir = o.out_dir / "points" / p.name;
      try {
        if (point_complete(dir, hashes.at(p.index))) {
          ++skipped;
        } else {
          const Scenario s = load_scenario(ConfigNode::wrap(p.tree, plan.source), catalog);
          RunOptions ro = o.run;
          ro.out_dir = dir.string();
          run_scenario(s, ro);
          ++ran;
        }
      } catch (...) {
        std::lock_guard lock(error_mu);
        failed = true;
        if (p.index < error_index) {  // the lowest failing index, as --jobs 1 would report
          error_index = p.index;
          error = std::current_exception();
        }
        return;
      }
      progress.done_one();
    }
  };
  const int jobs = std::max(1, std::min<int>(o.jobs, static_cast<int>(mine.size())));
  if (jobs == 1) {
    worker();
  } else {
    std::vector<std::thread> threads;
    for (int t = 0; t < jobs; ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
  }
  if (error) rethrow_with_point(error, point_label(plan, plan.points[error_index]));
  report.points_run = ran;
  report.points_skipped = skipped;
  if (o.shard_count == 1) {
    write_file_atomic(o.out_dir / "summary.csv", sweep_summary_csv({o.out_dir}));
    report.summary_written = true;
  }
  return report;
}

std::string sweep_summary_csv(const std::vector<fs::path>& dirs) {
  if (dirs.empty()) throw InputError("no sweep folders given");
  nlohmann::json index;
  for (const fs::path& d : dirs) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(d / "sweep.json"));
    } catch (const nlohmann::json::exception& e) {
      throw InputError(
          fmt::format("{}: not a sweep index: {}", (d / "sweep.json").string(), e.what()));
    }
    if (index.is_null()) {
      index = std::move(j);
    } else if (j["keys"] != index["keys"] || j["points"] != index["points"]) {
      throw InputError(
          fmt::format("{} and {} hold different sweeps", dirs.front().string(), d.string()));
    }
  }
  std::string header, rows;
  for (const auto& point : index["points"]) {
    const std::string name = point["name"].get<std::string>();
    const std::string hash = point["scenario_hash"].get<std::string>();
    std::string text;
    for (const fs::path& d : dirs) {
      if (point_complete(d / "points" / name, hash)) {
        text = read_file(d / "points" / name / "summary.csv");
        break;
      }
    }
    if (text.empty()) {
      throw InputError(fmt::format("sweep point {} ({}) has no finished run in {}{}",
                                   point["index"].get<size_t>(), name, dirs.front().string(),
                                   dirs.size() > 1 ? " or the other folders" : ""));
    }
    const size_t eol = text.find('\n');
    KVSIM_CHECK(eol != std::string::npos, "{}: summary.csv without a header", name);
    std::string prefix = std::to_string(point["index"].get<size_t>());
    // Appended piece by piece: `"," + temporary` trips GCC 12's -Wrestrict false positive.
    for (const auto& v : point["values"]) {
      prefix += ',';
      prefix += csv_field(v.get<std::string>());
    }
    if (header.empty()) {
      header = "point";
      for (const auto& k : index["keys"]) {
        header += ',';
        header += csv_field(k.get<std::string>());
      }
      header += ',';
      header.append(text, 0, eol + 1);
    }
    std::istringstream lines(text.substr(eol + 1));
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) rows += prefix + "," + line + "\n";
    }
  }
  return header + rows;
}

}  // namespace kvsim
