// Cell formatting for requests.csv rows, the one per-request cost every run pays: a million
// requests means four million fixed-point seconds cells.
#pragma once

#include <cstdint>

#include <fmt/format.h>

#include "core/sim_time.h"

namespace kvsim {

// Appends sim_to_seconds(ns) as fmt's "{:.6f}" writes it, byte for byte. Most values are
// written from the integer (microseconds rounded from nanoseconds) with no floating-point
// formatting; the rest (see the .cc) go through fmt itself.
void append_seconds_6(fmt::memory_buffer& out, SimTime ns);

// Appends `x` as fmt's "{:.6f}" writes it, byte for byte: from x * 10^6 in double arithmetic
// when that product's rounding error cannot change which micro-unit x rounds to, else via fmt.
void append_fixed_6(fmt::memory_buffer& out, double x);

// Appends `v` as fmt's "{}" writes it.
inline void append_int(fmt::memory_buffer& out, int64_t v) {
  const fmt::format_int text(v);
  out.append(text.data(), text.data() + text.size());
}

// Appends sim_to_seconds(ns)'s exact decimal, "{}.{:09d}" of ns / 10^9 and ns % 10^9 (requests.csv's
// latency breakdown: its cells sum to E2E to the nanosecond).
void append_seconds_9(fmt::memory_buffer& out, SimTime ns);

}  // namespace kvsim
