#include "core/text_table.h"

#include <algorithm>
#include <cctype>

namespace kvsim::cli {

namespace {

bool looks_numeric(const std::string& s) {
  if (s.empty()) return true;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == ',' || c == '.' || c == '-' ||
           c == '%' || c == '+' || c == 'e';
  });
}

}  // namespace

std::string TextTable::render() const {
  const size_t ncol = headers_.size();
  std::vector<size_t> width(ncol, 0);
  std::vector<bool> numeric(ncol, true);
  for (size_t c = 0; c < ncol; ++c) width[c] = headers_[c].size();
  for (const auto& row : rows_) {
    for (size_t c = 0; c < ncol && c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
      numeric[c] = numeric[c] && looks_numeric(row[c]);
    }
  }
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string out;
    for (size_t c = 0; c < ncol; ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const std::string pad(width[c] - cell.size(), ' ');
      const bool right = numeric[c] && !rows_.empty();
      (void)header;
      out += right ? pad + cell : cell + pad;
      if (c + 1 < ncol) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(headers_, true);
  std::string rule;
  for (size_t c = 0; c < ncol; ++c) rule += std::string(width[c], '-') + (c + 1 < ncol ? "  " : "");
  out += rule + "\n";
  for (const auto& row : rows_) out += line(row, false);
  return out;
}

std::string with_commas(long long v) {
  std::string digits = std::to_string(v < 0 ? -static_cast<unsigned long long>(v)
                                            : static_cast<unsigned long long>(v));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

}  // namespace kvsim::cli
