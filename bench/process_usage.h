// This process's resource use as getrusage reports it, for the benches' JSON lines.
#pragma once

#include <sys/resource.h>

#include <cstdint>

namespace kvsim::bench {

// The peak resident set so far, in bytes (Linux reports KiB).
inline int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

// User and system CPU seconds and minor page faults so far, apart (a fault maps a fresh page,
// which the kernel zeroes: system time that grows with the memory a run first touches).
struct CpuSplit {
  double user_s = 0;
  double sys_s = 0;
  int64_t minor_faults = 0;
};
inline CpuSplit cpu_split() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {static_cast<double>(u.ru_utime.tv_sec) + static_cast<double>(u.ru_utime.tv_usec) * 1e-6,
          static_cast<double>(u.ru_stime.tv_sec) + static_cast<double>(u.ru_stime.tv_usec) * 1e-6,
          static_cast<int64_t>(u.ru_minflt)};
}

}  // namespace kvsim::bench
