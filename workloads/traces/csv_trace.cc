// The CSV trace formats: normalized, Azure, BurstGPT and Vidur. They differ only in column names
// and in how the time is written, so one parser serves all four, locating columns by name.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "core/fnv1a.h"
#include "workloads/traces/field_parse.h"
#include "workloads/traces/row_parser.h"

namespace kvsim {

namespace {

using trace_detail::quote;
using trace_detail::trim;

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

// Splits a CSV line into `out` (views into `line`); returns the number of fields, counting past
// `out.size()` without storing. A field starting with '"' runs to the matching quote ("" inside
// is an escaped quote; the view keeps it doubled, which only matters for ignored text columns).
size_t split_csv(std::string_view line, std::vector<std::string_view>& out) {
  size_t n = 0;
  const bool quoted = std::memchr(line.data(), '"', line.size()) != nullptr;
  size_t pos = 0;
  while (true) {
    std::string_view field;
    size_t next = std::string_view::npos;
    if (quoted && pos < line.size() && line[pos] == '"') {
      size_t q = pos + 1;
      while (true) {
        q = line.find('"', q);
        if (q == std::string_view::npos) break;
        if (q + 1 < line.size() && line[q + 1] == '"') {
          q += 2;
          continue;
        }
        break;
      }
      if (q == std::string_view::npos) {  // unterminated quote: the rest is the field
        field = line.substr(pos);
      } else {
        field = line.substr(pos + 1, q - pos - 1);
        next = line.find(',', q + 1);
      }
    } else {
      const void* c = std::memchr(line.data() + pos, ',', line.size() - pos);
      next = c != nullptr ? static_cast<size_t>(static_cast<const char*>(c) - line.data())
                          : std::string_view::npos;
      field = line.substr(pos, next == std::string_view::npos ? line.size() - pos : next - pos);
    }
    if (n < out.size()) out[n] = field;
    ++n;
    if (next == std::string_view::npos) return n;
    pos = next + 1;
  }
}

class CsvRowParser final : public RowParser {
 public:
  CsvRowParser(std::string format, const CsvLayout& layout, std::unique_ptr<LineReader> lines,
               std::string header)
      : format_(std::move(format)), layout_(layout), lines_(std::move(lines)) {
    std::vector<std::string_view> names(256);
    n_fields_ = split_csv(header, names);
    names.resize(std::min<size_t>(n_fields_, names.size()));
    auto find = [&](const char* want) -> size_t {
      for (size_t i = 0; i < names.size(); ++i) {
        if (iequal(trim(names[i]), want)) return i;
      }
      throw InputError(fmt::format(
          "{}:1: expected the {} trace header with columns {},{},{}, got '{}' (no column '{}')",
          lines_->path(), format_, layout_.time, layout_.prompt, layout_.output, quote(header),
          want));
    };
    time_col_ = find(layout_.time);
    prompt_col_ = find(layout_.prompt);
    output_col_ = find(layout_.output);
    time_name_ = std::string(trim(names[time_col_]));
    prompt_name_ = std::string(trim(names[prompt_col_]));
    output_name_ = std::string(trim(names[output_col_]));
    if (layout_.request_columns) {
      for (size_t i = 0; i < names.size(); ++i) {
        if (iequal(trim(names[i]), "priority")) priority_col_ = i;
        if (iequal(trim(names[i]), "max_queue_time_s")) queue_time_col_ = i;
        if (iequal(trim(names[i]), "session_id")) session_col_ = i;
        if (iequal(trim(names[i]), "acceptance_rate")) acceptance_col_ = i;
      }
    }
    header_list_.clear();
    for (size_t i = 0; i < names.size(); ++i) {
      if (i > 0) header_list_ += ',';
      header_list_ += trim(names[i]);
    }
    fields_.resize(n_fields_);
  }

  bool next(RawRow& row) override {
    std::string_view line;
    do {
      if (!lines_->next(line)) return false;
    } while (trim(line).empty());
    const size_t n = split_csv(line, fields_);
    if (n != n_fields_) {
      throw TraceRowError(row_error(
          *lines_, fmt::format("expected {} comma-separated fields ({})", n_fields_, header_list_),
          line, fmt::format("{} field{}: ", n, n == 1 ? "" : "s")));
    }
    const std::string_view t = trim(fields_[time_col_]);
    auto time = layout_.datetime ? trace_detail::parse_datetime_ns(t)
                                 : trace_detail::parse_decimal_fixed(t, 9);
    if (!time) {
      throw TraceRowError(
          row_error(*lines_,
                    fmt::format("{}: expected {}", time_name_,
                                layout_.datetime ? "a date-time like 2023-11-16 18:17:03.9799600"
                                                 : "a number of seconds >= 0"),
                    t));
    }
    row.time_ns = *time;
    row.time_text = t;
    row.prompt_tokens = count(fields_[prompt_col_], prompt_name_);
    row.output_tokens = count(fields_[output_col_], output_name_);
    row.prefix_hashes.clear();
    row.hash_block_tokens = 0;
    row.priority = 0;
    row.max_queue_time.reset();
    row.session_id.reset();
    row.acceptance_nano = -1;
    if (acceptance_col_ != kNone) {
      if (const std::string_view f = trim(fields_[acceptance_col_]); !f.empty()) {
        auto v = trace_detail::parse_decimal_fixed(f, 9);
        if (!v || *v > 1'000'000'000) {
          throw TraceRowError(
              row_error(*lines_, "acceptance_rate: expected a number from 0 to 1", f));
        }
        row.acceptance_nano = static_cast<int32_t>(*v);  // at most 1e9: fits
      }
    }
    if (session_col_ != kNone) {
      const std::string_view f = trim(fields_[session_col_]);
      if (!f.empty()) row.session_id = fnv1a64(f);
    }
    if (priority_col_ != kNone) {
      if (const std::string_view f = trim(fields_[priority_col_]); !f.empty()) {
        auto v = trace_detail::parse_int(f);
        if (!v) throw TraceRowError(row_error(*lines_, "priority: expected an integer", f));
        row.priority = *v;
      }
    }
    if (queue_time_col_ != kNone) {
      if (const std::string_view f = trim(fields_[queue_time_col_]); !f.empty()) {
        auto v = trace_detail::parse_decimal_fixed(f, 9);
        if (!v || *v <= 0) {
          throw TraceRowError(
              row_error(*lines_, "max_queue_time_s: expected a number of seconds > 0", f));
        }
        row.max_queue_time = *v;
      }
    }
    return true;
  }

  const std::string& time_column() const override { return time_name_; }
  const LineReader& lines() const override { return *lines_; }

 private:
  int64_t count(std::string_view field, const std::string& name) const {
    field = trim(field);
    auto v = trace_detail::parse_int(field);
    if (!v || *v < 1) {
      throw TraceRowError(
          row_error(*lines_, fmt::format("{}: expected an integer >= 1", name), field));
    }
    return *v;
  }

  std::string format_;
  CsvLayout layout_;
  std::unique_ptr<LineReader> lines_;
  size_t n_fields_ = 0;
  static constexpr size_t kNone = static_cast<size_t>(-1);
  size_t time_col_ = 0, prompt_col_ = 0, output_col_ = 0;
  size_t priority_col_ = kNone, queue_time_col_ = kNone,
         session_col_ = kNone;  // optional (CsvLayout::request_columns)
  size_t acceptance_col_ = kNone;
  std::string time_name_, prompt_name_, output_name_, header_list_;
  std::vector<std::string_view> fields_;
};

}  // namespace

std::string row_error(const LineReader& lines, std::string_view what, std::string_view got,
                      std::string_view got_prefix) {
  return fmt::format("{}:{}: {}{}, got {}'{}'", lines.path(), lines.line_number(),
                     lines.had_newline() ? "" : "truncated last line (no newline at end of file): ",
                     what, got_prefix, quote(got));
}

std::unique_ptr<RowParser> make_csv_parser(std::string format, const CsvLayout& layout,
                                           std::unique_ptr<LineReader> lines,
                                           std::string first_line) {
  return std::make_unique<CsvRowParser>(std::move(format), layout, std::move(lines),
                                        std::move(first_line));
}

}  // namespace kvsim
