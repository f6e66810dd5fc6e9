// Unit tests of the PyTorch CUDACachingAllocator model (constants: facts.md §3).
#include <catch2/catch.hpp>

#include "core/errors.h"
#include "core/units.h"
#include "models/memory/caching_allocator.h"

using namespace kvsim;

TEST_CASE("caching allocator rounds to 512 B and picks PyTorch's segment sizes",
          "[memory][caching]") {
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::segment_size(512) == 2 * kMiB);
  CHECK(CachingAllocator::segment_size(kMiB) == 2 * kMiB);  // 1 MiB is still small
  CHECK(CachingAllocator::segment_size(kMiB + 512) == 20 * kMiB);
  CHECK(CachingAllocator::segment_size(9 * kMiB) == 20 * kMiB);
  CHECK(CachingAllocator::segment_size(10 * kMiB) == 10 * kMiB);  // >= 10 MiB: rounded to 2 MiB
  CHECK(CachingAllocator::segment_size(21 * kMiB + 1) == 22 * kMiB);
}

TEST_CASE("caching allocator packs small requests into a 2 MiB segment", "[memory][caching]") {
  CachingAllocator a(kGiB);
  CaBlockId x = -1, y = -1;
  REQUIRE(a.malloc(1000, &x));
  REQUIRE(a.malloc(1000, &y));
  CHECK(a.stats().reserved_bytes == 2 * kMiB);
  CHECK(a.stats().allocated_bytes == 2048);
  CHECK(a.stats().requested_bytes == 2000);
  CHECK(a.block_size(x) == 1024);
  a.check_invariants();
}

TEST_CASE("caching allocator splits large segments only past 1 MiB of remainder",
          "[memory][caching]") {
  CachingAllocator a(kGiB);
  CaBlockId b1 = -1, b2 = -1, b3 = -1;
  REQUIRE(a.malloc(8 * kMiB, &b1));  // 20 MiB segment: 8 used, 12 left (> 1 MiB: split)
  REQUIRE(a.malloc(8 * kMiB, &b2));  // from the 12: 4 left, split
  CHECK(a.stats().reserved_bytes == 20 * kMiB);
  REQUIRE(a.malloc(3 * kMiB + 512 * 1024, &b3));  // 3.5 MiB from the 4 MiB: 0.5 left, no split
  CHECK(a.block_size(b3) == 4 * kMiB);
  CHECK(a.stats().reserved_bytes == 20 * kMiB);
  a.check_invariants();
}

TEST_CASE("caching allocator keeps freed blocks reserved until empty_cache", "[memory][caching]") {
  CachingAllocator a(kGiB);
  CaBlockId b1 = -1, b2 = -1;
  REQUIRE(a.malloc(8 * kMiB, &b1));
  REQUIRE(a.malloc(30 * kMiB, &b2));
  a.free(b1);
  a.free(b2);
  CHECK(a.stats().allocated_bytes == 0);
  CHECK(a.stats().reserved_bytes == 50 * kMiB);
  CHECK(a.cached_bytes() == 50 * kMiB);
  CHECK(a.device_free_bytes() == kGiB - 50 * kMiB);
  a.check_invariants();
  a.empty_cache();
  CHECK(a.stats().reserved_bytes == 0);
  a.check_invariants();
}

TEST_CASE("caching allocator frees the cache and retries before an OOM", "[memory][caching]") {
  CachingAllocator a(40 * kMiB);
  CaBlockId x = -1, y = -1, z = -1;
  REQUIRE(a.malloc(18 * kMiB, &x));
  REQUIRE(a.malloc(18 * kMiB, &y));
  a.free(x);
  a.free(y);
  REQUIRE(a.malloc(30 * kMiB, &z));  // no cached block fits, no device room: empty cache, retry
  CHECK(a.stats().num_alloc_retries == 1);
  CHECK(a.stats().reserved_bytes == 30 * kMiB);
  CHECK(a.stats().num_ooms == 0);
  a.check_invariants();
}

TEST_CASE("caching allocator OOM from fragmentation says so", "[memory][caching]") {
  CachingAllocator a(20 * kMiB);
  CaBlockId x = -1, y = -1, z = -1;
  REQUIRE(a.malloc(8 * kMiB, &x));  // [x 8 | 12 free]
  REQUIRE(a.malloc(8 * kMiB, &y));  // [x 8 | y 8 | 4 free]
  a.free(x);                        // 12 MiB cached, in pieces of 8 and 4
  AllocResult r = a.malloc(10 * kMiB, &z);
  CHECK_FALSE(r.ok);
  CHECK(r.reason == OomReason::kFragmentation);
  CHECK(r.wanted_bytes == 10 * kMiB);
  CHECK(r.store_free_bytes == 12 * kMiB);
  CHECK(r.largest_free_bytes == 8 * kMiB);
  CHECK(r.torch_reserved_bytes == 20 * kMiB);
  CHECK(r.torch_allocated_bytes == 8 * kMiB);
  CHECK(a.stats().num_ooms == 1);
  CHECK(a.cached_bytes_unusable_for(10 * kMiB) == 12 * kMiB);
  a.check_invariants();
}

TEST_CASE("caching allocator honours max_split_size", "[memory][caching]") {
  CachingAllocator a(kGiB, 40 * kMiB);
  CaBlockId big = -1, small = -1, mid = -1;
  REQUIRE(a.malloc(100 * kMiB, &big));
  a.free(big);
  // A request below max_split_size never takes an oversize cached block.
  REQUIRE(a.malloc(8 * kMiB, &small));
  CHECK(a.stats().reserved_bytes == 120 * kMiB);
  // One above it takes a cached block only if it is < request + 20 MiB.
  REQUIRE(a.malloc(50 * kMiB, &mid));
  CHECK(a.stats().reserved_bytes == 170 * kMiB);
  a.check_invariants();
}

TEST_CASE("caching allocator refuses a double free", "[memory][caching]") {
  CachingAllocator a(kGiB);
  CaBlockId x = -1;
  REQUIRE(a.malloc(4096, &x));
  a.free(x);
  CHECK_THROWS_AS(a.free(x), InvariantError);
}
