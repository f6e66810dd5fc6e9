#include "sim/sweep/sweep_index.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/data_path.h"
#include "core/errors.h"

namespace kvsim {

namespace fs = std::filesystem;

SweepIndexWriter::SweepIndexWriter(const fs::path& path, const SweepPlan& plan) : file_(path) {
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

void SweepIndexWriter::add(const SweepPoint& p, const std::string& hash) {
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

void SweepIndexWriter::commit() {
  file_.append("\n  ]\n}\n");
  file_.commit();
}

SweepIndexReader::SweepIndexReader(fs::path path,
                                   std::function<void(const Json&, const Json&)> on_point)
    : path_(std::move(path)), on_point_(std::move(on_point)) {}

SweepIndexReader::Json SweepIndexReader::read() {
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw InputError(fmt::format("cannot read {}", path_.string()));
  Json::sax_parse(in, this);
  if (!head_.is_object()) throw InputError(fmt::format("{}: not a sweep index", path_.string()));
  return std::move(head_);
}

bool SweepIndexReader::null() { return put(nullptr); }
bool SweepIndexReader::boolean(bool v) { return put(v); }
bool SweepIndexReader::number_integer(number_integer_t v) { return put(v); }
bool SweepIndexReader::number_unsigned(number_unsigned_t v) { return put(v); }
bool SweepIndexReader::number_float(number_float_t v, const string_t&) { return put(v); }
bool SweepIndexReader::string(string_t& v) { return put(v); }
bool SweepIndexReader::binary(binary_t& v) { return put(Json::binary(v)); }
bool SweepIndexReader::start_object(std::size_t) { return open(Json::object()); }
bool SweepIndexReader::end_object() { return close(); }
bool SweepIndexReader::start_array(std::size_t) {
  if (levels_.size() == 1 && levels_.back().node == &head_ && levels_.back().key == "points") {
    levels_.push_back({nullptr, {}});  // the points array: its elements are not kept
    return true;
  }
  return open(Json::array());
}
bool SweepIndexReader::end_array() { return close(); }
bool SweepIndexReader::key(string_t& k) {
  levels_.back().key = k;
  return true;
}
bool SweepIndexReader::parse_error(std::size_t, const std::string&,
                                   const nlohmann::detail::exception& e) {
  throw InputError(fmt::format("{}: not a sweep index: {}", path_.string(), e.what()));
}

// Places `v` in the innermost open container (a point of its own inside `points`).
SweepIndexReader::Json* SweepIndexReader::place(Json v) {
  if (levels_.empty()) return &(head_ = std::move(v));
  Level& top = levels_.back();
  if (top.node == nullptr) return &(point_ = std::move(v));
  if (top.node->is_object()) return &((*top.node)[top.key] = std::move(v));
  top.node->push_back(std::move(v));
  return &top.node->back();
}

bool SweepIndexReader::put(Json v) {
  if (place(std::move(v)) == &point_) emit();
  return true;
}

bool SweepIndexReader::open(Json v) {
  Json* node = place(std::move(v));
  levels_.push_back({node, {}});
  return true;
}

bool SweepIndexReader::close() {
  const Json* node = levels_.back().node;
  levels_.pop_back();
  if (node == &point_) emit();
  return true;
}

void SweepIndexReader::emit() {
  on_point_(head_, point_);
  point_ = Json();
}

std::string read_sweep_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("cannot read {}", path.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool point_complete(const fs::path& dir, const std::string& hash) {
  const fs::path manifest = dir / "manifest.json";
  if (!fs::exists(manifest)) return false;
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(read_sweep_file(manifest));
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

}  // namespace kvsim
