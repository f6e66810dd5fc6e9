// Cell formatting for requests.csv rows, the one per-request cost every run pays: a million
// requests means four million fixed-point seconds cells.
#pragma once

#include <fmt/format.h>

#include "core/sim_time.h"

namespace kvsim {

// Appends sim_to_seconds(ns) as fmt's "{:.6f}" writes it, byte for byte. Most values are
// written from the integer (microseconds rounded from nanoseconds) with no floating-point
// formatting; the rest (see the .cc) go through fmt itself.
void append_seconds_6(fmt::memory_buffer& out, SimTime ns);

}  // namespace kvsim
