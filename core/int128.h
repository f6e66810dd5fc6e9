// A 128-bit signed integer for exact sums that outgrow int64 (byte-nanosecond integrals, FLOPs in
// fixed point): GCC and Clang's __int128, named once so -Wpedantic accepts it.
#pragma once

namespace kvsim {

__extension__ typedef __int128 Int128;

}  // namespace kvsim
