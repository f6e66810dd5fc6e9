// sweep.json, the index of a sweep's points: written point by point while the plan is checked,
// and read back as a stream (kvsim merge, summary.csv), so a million-point sweep never holds its
// index in memory. What every shard writes identically: enough to check that folders belong
// together and to name every point without re-reading the scenario; the version and the hash of
// the scenario as given head the index, and `axes` tells the plots which keys move together (a
// zip is one axis).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "sim/sweep/sweep_plan.h"

namespace kvsim {

// Writes the bytes `nlohmann::ordered_json::dump(2)` gives for the whole document, one point at a
// time; committed (renamed into place) only by commit().
class SweepIndexWriter {
 public:
  SweepIndexWriter(const std::filesystem::path& path, const SweepPlan& plan);
  void add(const SweepPoint& p, const std::string& hash);
  void commit();

 private:
  AtomicFile file_;
  bool first_ = true;
};

// Reads sweep.json as a stream: everything but `points` into the head, and each element of
// `points` handed to `on_point` as soon as it is parsed and then dropped, so reading the index
// of a million-point sweep holds one point at a time.
class SweepIndexReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  using Json = nlohmann::json;
  SweepIndexReader(std::filesystem::path path,
                   std::function<void(const Json& head, const Json& point)> on_point);

  // Returns the head (every key but `points`). Throws InputError for unreadable or malformed JSON.
  Json read();

  bool null() override;
  bool boolean(bool v) override;
  bool number_integer(number_integer_t v) override;
  bool number_unsigned(number_unsigned_t v) override;
  bool number_float(number_float_t v, const string_t&) override;
  bool string(string_t& v) override;
  bool binary(binary_t& v) override;
  bool start_object(std::size_t) override;
  bool end_object() override;
  bool start_array(std::size_t) override;
  bool end_array() override;
  bool key(string_t& k) override;
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override;

 private:
  struct Level {
    Json* node;  // the open object or array; nullptr for the points array
    std::string key;
  };
  Json* place(Json v);
  bool put(Json v);
  bool open(Json v);
  bool close();
  void emit();

  std::filesystem::path path_;
  std::function<void(const Json&, const Json&)> on_point_;
  Json head_;
  Json point_;
  std::vector<Level> levels_;
};

// The whole file at `path` (a point's manifest.json or summary.csv). Throws InputError.
std::string read_sweep_file(const std::filesystem::path& path);

// True when `dir` holds a finished run of the scenario with `hash` (its manifest.json, written
// last). A folder holding a finished run of something else is an InputError: silently mixing two
// sweeps' results would be worse.
bool point_complete(const std::filesystem::path& dir, const std::string& hash);

}  // namespace kvsim
