// RowParser: the per-format half of a trace reader. It turns one line at a time into a RawRow
// (absolute time in ns, token counts, prefix hashes) and reports malformed rows as
// TraceRowError; TraceSource (trace_reader.cc) applies ordering, window, scale, caps and ids.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.h"
#include "workloads/traces/line_reader.h"

namespace kvsim {

// A malformed row: "FILE:LINE: <what was expected>, got '<content>'". on_bad_row: skip drops
// exactly these; every other InputError (unreadable or binary file) stops the reading.
class TraceRowError : public InputError {
 public:
  using InputError::InputError;
};

struct RawRow {
  int64_t time_ns = 0;  // in the format's own clock (made relative by TraceSource)
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  std::vector<uint64_t> prefix_hashes;
  int64_t hash_block_tokens = 0;
  int64_t priority = 0;                   // optional column (normalized CSV); 0 when absent
  std::optional<int64_t> max_queue_time;  // ns; optional column (normalized CSV)
  std::optional<uint64_t> session_id;  // FNV-1a of the optional `session_id` cell (normalized CSV)
  int32_t acceptance_nano =
      -1;  // optional `acceptance_rate` column (normalized CSV), in 1e-9; -1: none
  std::string_view time_text;  // the time field as written, valid until the next call
};

// Where a CSV format keeps its fields (columns found by name, case-insensitively).
struct CsvLayout {
  const char* time;
  const char* prompt;
  const char* output;
  bool datetime;  // the time is a calendar date-time (Azure), not a number of seconds
  // The format may carry the optional per-request columns `priority` (an integer, lower served
  // first), `max_queue_time_s` (seconds > 0) and `session_id` (any text: a conversation or
  // user, for a cluster's session_affinity router) and `acceptance_rate` (speculative decoding:
  // this request's chance, 0 to 1, that a draft token is accepted given the one before); an empty
  // cell means not given.
  bool request_columns = false;
};

class RowParser {
 public:
  virtual ~RowParser() = default;
  // Fills `row` from the next non-blank line; false at the end of the file. Throws TraceRowError
  // for a malformed row (the next call continues after it).
  virtual bool next(RawRow& row) = 0;
  // The time column's name as the file spells it, for messages.
  virtual const std::string& time_column() const = 0;
  virtual const LineReader& lines() const = 0;
};

// `first_line` is line 1 already read from `lines` (a CSV header, or Mooncake's first record).
// Throws InputError when a CSV header lacks the format's columns; `format` names it there.
std::unique_ptr<RowParser> make_csv_parser(std::string format, const CsvLayout& layout,
                                           std::unique_ptr<LineReader> lines,
                                           std::string first_line);
std::unique_ptr<RowParser> make_mooncake_parser(std::unique_ptr<LineReader> lines,
                                                std::string first_line);

// "FILE:LINE: <what>, got <got_prefix>'<got>'", with "truncated last line (no newline at end of
// file): " before <what> when the line is the file's last and has no newline.
std::string row_error(const LineReader& lines, std::string_view what, std::string_view got,
                      std::string_view got_prefix = "");

}  // namespace kvsim
