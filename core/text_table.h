// A plain-text table for terminal output: headers, right-aligned numbers, left-aligned text.
#pragma once

#include <string>
#include <vector>

namespace kvsim::cli {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  // Columns whose cells all look numeric are right-aligned.
  std::string render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// 1234567 -> "1,234,567" (negative numbers keep their sign).
std::string with_commas(long long v);

}  // namespace kvsim::cli
