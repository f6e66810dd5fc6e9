#include "kernels/cpu_ref/membw_ref.h"

#include <cstring>

#include "core/check.h"

namespace kvsim::kernels {

void membw_copy_cpu(std::span<const uint64_t> src, std::span<uint64_t> dst) {
  KVSIM_CHECK(src.size() == dst.size(), "copy of {} words into {}", src.size(), dst.size());
  std::memcpy(dst.data(), src.data(), src.size_bytes());
}

uint64_t membw_read_cpu(std::span<const uint64_t> src) {
  // Four independent sums so the loop is bound by loads, not by one add chain.
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= src.size(); i += 4) {
    a += src[i];
    b += src[i + 1];
    c += src[i + 2];
    d += src[i + 3];
  }
  for (; i < src.size(); ++i) a += src[i];
  return a + b + c + d;
}

}  // namespace kvsim::kernels
