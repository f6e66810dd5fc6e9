#include "sim/sweep/sweep_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "sim/config/scenario.h"
#include "sim/sweep/sweep_index.h"

namespace kvsim {

namespace fs = std::filesystem;

namespace {

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

std::string point_label(const SweepPlan& plan, size_t index) {
  const std::vector<std::string> values = plan.points.values(index);
  std::string label;
  for (size_t k = 0; k < plan.keys.size(); ++k) {
    label += fmt::format("{}{}={}", k ? ", " : "", plan.keys[k], values[k]);
  }
  return fmt::format("sweep point {} ({})", index, label);
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

// The scenario hash heading `index` (an earlier sweep's sweep.json); "" when it is unreadable.
std::string indexed_scenario_hash(const fs::path& index) {
  try {
    return SweepIndexReader(index, [](const nlohmann::json&, const nlohmann::json&) {})
        .read()
        .value("scenario_hash", "");
  } catch (const InputError&) {
    return "";
  }
}

// Into a folder holding the sweep of another scenario, every point folder this shard would use is
// checked before anything is written: one holding a finished run of a different scenario refuses
// the sweep, and the refusal leaves the folder as it was (the check beside the running points
// would already have replaced sweep.json). A resume of the same scenario skips this pass.
void refuse_foreign_points(const SweepPlan& plan, const SweepOptions& o) {
  const fs::path index = o.out_dir / "sweep.json";
  if (!fs::exists(index) || indexed_scenario_hash(index) == plan.scenario_hash) return;
  for (size_t i = static_cast<size_t>(o.shard_index); i < plan.points.size();
       i += static_cast<size_t>(o.shard_count)) {
    const SweepPoint p = plan.points[i];
    const fs::path dir = o.out_dir / "points" / p.name;
    if (!fs::exists(dir / "manifest.json")) continue;
    try {
      point_complete(dir, scenario_hash(p.tree));
    } catch (...) {
      rethrow_with_point(std::current_exception(), point_label(plan, i));
    }
  }
}

// The sweep's folder, once refuse_foreign_points has let the sweep in: OUT/points/ made.
void prepare_sweep_folder(const SweepPlan& plan, const SweepOptions& o) {
  refuse_foreign_points(plan, o);
  fs::create_directories(o.out_dir / "points");
  remove_stale_temporaries_in(o.out_dir);
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
  // Nothing here is held per point: each point's tree is built when it is checked and again when
  // it runs, and dropped after; sweep.json and summary.csv are written as streams.
  SweepReport report;
  const size_t total = plan.points.size();
  const auto shard_index = static_cast<size_t>(o.shard_index);
  const auto shard_count = static_cast<size_t>(o.shard_count);
  report.points_total = total;
  report.points_mine = total > shard_index ? (total - shard_index - 1) / shard_count + 1 : 0;
  // Every point's top level is checked, and the index (sweep.json) written, on a thread of its
  // own while the points run: a worker starts a point once the check has passed it, so a
  // million-point sweep runs its first points within seconds instead of after the whole pass
  // (minutes), and a resume does not wait for it either. A bad value still stops the sweep as soon
  // as the check reaches it; the points run before it are complete folders a resume keeps.
  prepare_sweep_folder(plan, o);
  std::atomic<bool> failed{false};
  std::mutex check_mu;
  std::condition_variable check_cv;
  size_t checked = 0;  // points [0, checked) passed the check
  bool check_over = false;
  std::exception_ptr check_error;
  std::thread checker([&] {
    try {
      SweepIndexWriter index(o.out_dir / "sweep.json", plan);
      for (size_t i = 0; i < total && !failed; ++i) {
        try {
          const SweepPoint p = plan.points[i];
          load_scenario(plan.points.config(p), catalog);
          index.add(p, scenario_hash(p.tree));
        } catch (...) {
          rethrow_with_point(std::current_exception(), point_label(plan, i));
        }
        if (i % 64 == 63 || i + 1 == total) {
          std::lock_guard lock(check_mu);
          checked = i + 1;
          check_cv.notify_all();
        }
      }
      if (!failed) index.commit();
    } catch (...) {
      std::lock_guard lock(check_mu);
      check_error = std::current_exception();
      failed = true;
    }
    std::lock_guard lock(check_mu);
    check_over = true;
    check_cv.notify_all();
  });
  // Whether point `index` may run: once checked; false when the check failed or the sweep did.
  const auto wait_checked = [&](size_t index) {
    std::unique_lock lock(check_mu);
    check_cv.wait(lock, [&] { return index < checked || check_over || failed; });
    return index < checked && !failed;
  };

  // With an interrupt check the points stop with the sweep: each point's own poll throws once
  // `abandoned` is set (a private type, dropped: the caller's exception is the one rethrown).
  struct Abandoned {};
  std::atomic<bool> abandoned{false};
  RunOptions point_run = o.run;
  if (o.interrupt_check) {
    point_run.interrupt_check = [&abandoned, inner = o.run.interrupt_check] {
      if (inner) inner();
      if (abandoned) throw Abandoned{};
    };
  }

  std::atomic<size_t> next{0};
  std::atomic<size_t> ran{0}, skipped{0};
  std::mutex error_mu;
  size_t error_index = SIZE_MAX;
  std::exception_ptr error;
  Progress progress(o.progress, report.points_mine);
  auto worker = [&] {
    while (!failed) {
      const size_t k = next++;
      if (k >= report.points_mine) return;
      const size_t index = shard_index + k * shard_count;
      if (!wait_checked(index)) return;
      try {
        const SweepPoint p = plan.points[index];
        const fs::path dir = o.out_dir / "points" / p.name;
        if (point_complete(dir, scenario_hash(p.tree))) {
          ++skipped;
        } else {
          const Scenario s = load_scenario(plan.points.config(p), catalog);
          RunOptions ro = point_run;
          ro.out_dir = dir.string();
          run_scenario(s, ro);
          ++ran;
        }
      } catch (...) {
        std::lock_guard lock(error_mu);
        failed = true;
        if (index < error_index) {  // the lowest failing index, as --jobs 1 would report
          error_index = index;
          error = std::current_exception();
        }
        std::lock_guard check_lock(check_mu);
        check_cv.notify_all();
        return;
      }
      progress.done_one();
    }
  };
  const int jobs = std::max(1, static_cast<int>(std::min<size_t>(
                                   static_cast<size_t>(std::max(o.jobs, 1)), report.points_mine)));
  std::exception_ptr interrupt;
  if (jobs == 1 && !o.interrupt_check) {
    worker();
  } else {
    int workers_left = jobs;  // guarded by check_mu
    std::vector<std::thread> threads;
    for (int t = 0; t < jobs; ++t) {
      threads.emplace_back([&] {
        worker();
        std::lock_guard lock(check_mu);
        --workers_left;
        check_cv.notify_all();
      });
    }
    // This thread polls the caller's interrupt check until the workers and the check are done.
    while (o.interrupt_check && !interrupt) {
      {
        std::unique_lock lock(check_mu);
        if (check_cv.wait_for(lock, std::chrono::milliseconds(50),
                              [&] { return workers_left == 0 && check_over; })) {
          break;
        }
      }
      try {
        o.interrupt_check();
      } catch (...) {
        interrupt = std::current_exception();
        std::lock_guard lock(check_mu);
        abandoned = true;
        failed = true;
        check_cv.notify_all();
      }
    }
    for (auto& t : threads) t.join();
  }
  checker.join();
  if (interrupt) std::rethrow_exception(interrupt);      // the caller's own, as it threw it
  if (check_error) std::rethrow_exception(check_error);  // a bad point: the input's error first
  if (error) rethrow_with_point(error, point_label(plan, error_index));
  report.points_run = ran;
  report.points_skipped = skipped;
  if (o.shard_count == 1) {
    write_sweep_summary_csv({o.out_dir}, o.out_dir / "summary.csv");
    report.summary_written = true;
  }
  return report;
}

}  // namespace kvsim
