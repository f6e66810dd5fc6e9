// One line of a CSV file the project reads back (measurements.csv, claims files, requests.csv,
// iterations.csv): comma-separated fields, each optionally double-quoted from its first character
// ("" inside quotes is a quote), a trailing '\r' dropped. The trace readers split in place instead
// (workloads/traces/csv_trace.cc: string views, no copies, for speed).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvsim {

// Splits `line` into `out` (replacing its contents). False when a quoted field is not closed.
bool split_csv_line(std::string_view line, std::vector<std::string>& out);

}  // namespace kvsim
