// CPU bandwidth probe: the same two patterns as the CUDA probe (copy: read n bytes and write n;
// read: read n bytes into a checksum that cannot be optimised away).
#pragma once

#include <cstdint>
#include <span>

namespace kvsim::kernels {

void membw_copy_cpu(std::span<const uint64_t> src, std::span<uint64_t> dst);
// Sum of the words (wrapping), the value the CUDA read kernel's blocks add up to.
uint64_t membw_read_cpu(std::span<const uint64_t> src);

}  // namespace kvsim::kernels
