// Cell formatting for requests.csv (and timeseries.csv) rows, the one per-request cost every run
// pays: a million requests means millions of integer and fixed-point cells. Each function writes a
// cell's text at `p`, exactly as fmt would format it, and returns the end; the caller provides room
// for kMaxCellChars (digits straight into the row, without fmt's per-call buffer appends).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/sim_time.h"

namespace kvsim {

// The longest cell any function below writes: "{:.6f}" of -DBL_MAX is 317 characters.
inline constexpr size_t kMaxCellChars = 320;

// `v` as fmt's "{}" writes it.
char* write_int(char* p, int64_t v);

// sim_to_seconds(ns) as fmt's "{:.6f}" writes it. Most values are written from the integer
// (microseconds rounded from nanoseconds) with no floating-point formatting; the rest (see the
// .cc) go through fmt itself.
char* write_seconds_6(char* p, SimTime ns);

// sim_to_seconds(ns) as fmt's "{:.3f}" writes it (timeseries.csv's t_s), the same way.
char* write_seconds_3(char* p, SimTime ns);

// `x` as fmt's "{:.6f}" writes it: from x * 10^6 in double arithmetic when that product's
// rounding error cannot change which micro-unit x rounds to, else through fmt.
char* write_fixed_6(char* p, double x);

// sim_to_seconds(ns)'s exact decimal, "{}.{:09d}" of ns / 10^9 and ns % 10^9 (requests.csv's
// latency breakdown: its cells sum to E2E to the nanosecond).
char* write_seconds_9(char* p, SimTime ns);

// `text` (any length: the caller provides room for it).
inline char* write_text(char* p, std::string_view text) {
  for (char c : text) *p++ = c;
  return p;
}

}  // namespace kvsim
