#include "core/csv_line.h"

namespace kvsim {

bool split_csv_line(std::string_view line, std::vector<std::string>& out) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  out.assign(1, std::string());
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        out.back() += ch;
      }
    } else if (ch == '"' && out.back().empty()) {
      quoted = true;
    } else if (ch == ',') {
      out.emplace_back();
    } else {
      out.back() += ch;
    }
  }
  return !quoted;
}

}  // namespace kvsim
