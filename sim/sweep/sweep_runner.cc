#include "sim/sweep/sweep_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "sim/config/scenario.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/data_path.h"
#include "core/errors.h"
#include "core/fnv1a.h"

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

// sweep.json, written point by point (a million-point sweep never holds its index in memory),
// with the bytes `nlohmann::ordered_json::dump(2)` gives for the whole document. What every shard
// writes identically: enough to check that folders belong together and to name every point
// without re-reading the scenario; the version and the hash of the scenario as given head the
// report, and `axes` tells the plots which keys move together (a zip is one axis).
class SweepIndexWriter {
 public:
  SweepIndexWriter(const fs::path& path, const SweepPlan& plan) : file_(path) {
    nlohmann::ordered_json head;
    head["kvsim_version"] = kvsim_version();
    head["scenario_source"] = plan.source;
    head["scenario_hash"] = plan.scenario_hash;
    head["keys"] = plan.keys;
    head["axes"] = plan.axes;
    std::string text = head.dump(2);
    text.resize(text.size() - 2);  // reopen the object: drop its closing "\n}"
    file_.append(text);
    file_.append(",\n  \"points\": [\n");
  }

  void add(const SweepPoint& p, const std::string& hash) {
    const nlohmann::ordered_json j = {
        {"index", p.index}, {"name", p.name}, {"values", p.values}, {"scenario_hash", hash}};
    if (!first_) file_.append(",\n");
    first_ = false;
    // An element of `points` sits two levels deep: every line of its own dump indented by 4.
    std::string text = "    ";
    for (char c : j.dump(2)) {
      text += c;
      if (c == '\n') text += "    ";
    }
    file_.append(text);
  }

  void commit() {
    file_.append("\n  ]\n}\n");
    file_.commit();
  }

 private:
  AtomicFile file_;
  bool first_ = true;
};

// Reads sweep.json as a stream: everything but `points` into `head`, and each element of
// `points` handed to `on_point` as soon as it is parsed and then dropped, so reading the index
// of a million-point sweep holds one point at a time.
class SweepIndexReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  using Json = nlohmann::json;
  SweepIndexReader(fs::path path, std::function<void(const Json& head, const Json& point)> on_point)
      : path_(std::move(path)), on_point_(std::move(on_point)) {}

  // Returns the head (every key but `points`). Throws InputError for unreadable or malformed JSON.
  Json read() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) throw InputError(fmt::format("cannot read {}", path_.string()));
    Json::sax_parse(in, this);
    if (!head_.is_object()) throw InputError(fmt::format("{}: not a sweep index", path_.string()));
    return std::move(head_);
  }

  bool null() override { return put(nullptr); }
  bool boolean(bool v) override { return put(v); }
  bool number_integer(number_integer_t v) override { return put(v); }
  bool number_unsigned(number_unsigned_t v) override { return put(v); }
  bool number_float(number_float_t v, const string_t&) override { return put(v); }
  bool string(string_t& v) override { return put(v); }
  bool binary(binary_t& v) override { return put(Json::binary(v)); }
  bool start_object(std::size_t) override { return open(Json::object()); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    if (levels_.size() == 1 && levels_.back().node == &head_ && levels_.back().key == "points") {
      levels_.push_back({nullptr, {}});  // the points array: its elements are not kept
      return true;
    }
    return open(Json::array());
  }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    levels_.back().key = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw InputError(fmt::format("{}: not a sweep index: {}", path_.string(), e.what()));
  }

 private:
  struct Level {
    Json* node;  // the open object or array; nullptr for the points array
    std::string key;
  };
  // Places `v` in the innermost open container (a point of its own inside `points`).
  Json* place(Json v) {
    if (levels_.empty()) return &(head_ = std::move(v));
    Level& top = levels_.back();
    if (top.node == nullptr) return &(point_ = std::move(v));
    if (top.node->is_object()) return &((*top.node)[top.key] = std::move(v));
    top.node->push_back(std::move(v));
    return &top.node->back();
  }
  bool put(Json v) {
    if (place(std::move(v)) == &point_) emit();
    return true;
  }
  bool open(Json v) {
    Json* node = place(std::move(v));
    levels_.push_back({node, {}});
    return true;
  }
  bool close() {
    const Json* node = levels_.back().node;
    levels_.pop_back();
    if (node == &point_) emit();
    return true;
  }
  void emit() {
    on_point_(head_, point_);
    point_ = Json();
  }

  fs::path path_;
  std::function<void(const Json&, const Json&)> on_point_;
  Json head_;
  Json point_;
  std::vector<Level> levels_;
};

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
  fs::create_directories(o.out_dir / "points");
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
          load_scenario(ConfigNode::wrap(p.tree, plan.source), catalog);
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
          const Scenario s = load_scenario(ConfigNode::wrap(p.tree, plan.source), catalog);
          RunOptions ro = o.run;
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
        check_cv.notify_all();
        return;
      }
      progress.done_one();
    }
  };
  const int jobs =
      std::max(1, static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(o.jobs, 1)),
                                                    report.points_mine)));
  if (jobs == 1) {
    worker();
  } else {
    std::vector<std::thread> threads;
    for (int t = 0; t < jobs; ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
  }
  checker.join();
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

namespace {

// FNV-1a of what `kvsim merge` requires to agree between folders (`keys` and every point), read
// as a stream; the points are counted in.
uint64_t index_digest(const fs::path& dir) {
  uint64_t h = kFnv1aOffsetBasis;
  SweepIndexReader reader(dir / "sweep.json", [&](const nlohmann::json&, const nlohmann::json& p) {
    h = fnv1a64(p.dump(), h);
    h = fnv1a64("\n", h);
  });
  const nlohmann::json head = reader.read();
  return fnv1a64(head.value("keys", nlohmann::json()).dump(), h);
}

// Streams summary.csv to `out`: the header, then each point's rows, in point order.
void sweep_summary(const std::vector<fs::path>& dirs,
                   const std::function<void(std::string_view)>& out) {
  if (dirs.empty()) throw InputError("no sweep folders given");
  if (dirs.size() > 1) {
    const uint64_t first = index_digest(dirs.front());
    for (size_t d = 1; d < dirs.size(); ++d) {
      if (index_digest(dirs[d]) != first) {
        throw InputError(fmt::format("{} and {} hold different sweeps", dirs.front().string(),
                                     dirs[d].string()));
      }
    }
  }
  bool header_written = false;
  std::string rows;
  SweepIndexReader reader(dirs.front() / "sweep.json", [&](const nlohmann::json& index,
                                                           const nlohmann::json& point) {
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
    if (!header_written) {
      std::string header = "point";
      for (const auto& k : index.at("keys")) {
        header += ',';
        header += csv_field(k.get<std::string>());
      }
      header += ',';
      header.append(text, 0, eol + 1);
      out(header);
      header_written = true;
    }
    rows.clear();
    std::istringstream lines(text.substr(eol + 1));
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) {
        rows += prefix;
        rows += ',';
        rows += line;
        rows += '\n';
      }
    }
    out(rows);
  });
  reader.read();
}

}  // namespace

std::string sweep_summary_csv(const std::vector<fs::path>& dirs) {
  std::string csv;
  sweep_summary(dirs, [&](std::string_view piece) { csv += piece; });
  return csv;
}

void write_sweep_summary_csv(const std::vector<fs::path>& dirs, const fs::path& path) {
  AtomicFile file(path);
  sweep_summary(dirs, [&](std::string_view piece) { file.append(piece); });
  file.commit();
}

}  // namespace kvsim
