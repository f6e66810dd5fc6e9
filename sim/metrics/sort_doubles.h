// Sorting a run's latency samples (up to 10^6 per metric) for their percentiles.
#pragma once

#include <vector>

namespace kvsim {

// Sorts `v` ascending: the same sequence std::sort gives. Latencies are never negative, and a
// non-negative double's bits, read as an unsigned integer, order as its value does (and equal
// values have equal bits), so such samples are sorted by a radix sort on those bits, several
// times faster than comparison sorting at these sizes. Any sample with its sign bit set (a
// negative, -0.0) or a NaN: std::sort.
void sort_doubles(std::vector<double>& v);

}  // namespace kvsim
