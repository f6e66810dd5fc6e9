#include "sim/sweep/sweep_summary.h"

#include <fmt/format.h>

#include <functional>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/errors.h"
#include "core/fnv1a.h"
#include "sim/sweep/sweep_index.h"

namespace kvsim {

namespace fs = std::filesystem;

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

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
  SweepIndexReader reader(
      dirs.front() / "sweep.json", [&](const nlohmann::json& index, const nlohmann::json& point) {
        const std::string name = point["name"].get<std::string>();
        const std::string hash = point["scenario_hash"].get<std::string>();
        std::string text;
        for (const fs::path& d : dirs) {
          if (point_complete(d / "points" / name, hash)) {
            text = read_sweep_file(d / "points" / name / "summary.csv");
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
