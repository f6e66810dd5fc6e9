// Checked KV arithmetic at the edges of int64: the largest figures that fit are exact,
// one step past them is a clean InputError, never a silent wrap-around.
#include <catch2/catch.hpp>

#include <limits>

#include "core/errors.h"
#include "core/units.h"
#include "models/catalog.h"
#include "models/kv_calculator.h"

using namespace kvsim;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// seed-7b-mha: 32 layers x 32 KV heads x 128 x 2 (K and V) x 2 bytes = 2^19 bytes per token.
KvQuery query(int64_t seq, int64_t batch) {
  KvQuery q;
  q.model = Catalog::builtin().model("seed-7b-mha");
  q.seq_lens = {seq};
  q.batch = batch;
  return q;
}
}  // namespace

TEST_CASE("KV bytes: the largest product that fits is exact, the next overflows", "[kv][bounds]") {
  REQUIRE(query(1, 1).model.kv_bytes_per_token() == int64_t{1} << 19);
  // 2^19 x 2^20 tokens x 2^23 requests = 2^62: fits.
  const auto rows = kv_table(query(int64_t{1} << 20, int64_t{1} << 23));
  CHECK(rows[0].kv_bytes_per_request == int64_t{1} << 39);
  CHECK(rows[0].kv_bytes_total == int64_t{1} << 62);
  // Twice that is 2^63 > INT64_MAX.
  CHECK_THROWS_AS(kv_table(query(int64_t{1} << 20, int64_t{1} << 24)), InputError);
  // A trillion-token request for a whole batch, the CLI's upper bounds.
  CHECK_THROWS_WITH(kv_table(query(1'000'000'000'000, 100'000'000)),
                    Catch::Contains("overflow 64-bit arithmetic"));
  // The per-request product alone overflowing.
  CHECK_THROWS_AS(kv_table(query(int64_t{1} << 44, 1)), InputError);
}

TEST_CASE("KV bytes: remaining capacity near INT64_MIN is checked", "[kv][bounds]") {
  // total = 2^19 x (2^44 - 1) = 2^63 - 2^19, just under INT64_MAX.
  KvQuery q = query((int64_t{1} << 44) - 1, 1);
  q.capacity_bytes = 1;
  q.weights_bytes = 0;
  const auto rows = kv_table(q);
  CHECK(rows[0].kv_bytes_total == kMax - (int64_t{1} << 19) + 1);
  CHECK(*rows[0].remaining_bytes == 1 - rows[0].kv_bytes_total);
  CHECK(rows[0].risk == Risk::kCritical);
  // 1e15 bytes of weights (the CLI's --weights-gb limit) on top would pass INT64_MIN: it used to
  // wrap to a large positive "remaining" (signed overflow, undefined behaviour).
  q.weights_bytes = 1'000'000 * kGB;
  CHECK_THROWS_WITH(kv_table(q), Catch::Contains("overflow 64-bit arithmetic"));
}
