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

// User + system CPU seconds so far.
inline double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

}  // namespace kvsim::bench
