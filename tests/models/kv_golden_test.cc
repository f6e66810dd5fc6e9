// Golden tests: the seeds' KV arithmetic, exact to the byte.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/units.h"
#include "models/catalog.h"
#include "models/kv_calculator.h"

using namespace kvsim;

namespace {
KvQuery seed_a_query() {
  KvQuery q;
  q.model = Catalog::builtin().model("seed-7b-mha");
  q.seq_lens = {2048, 4096, 8192, 16384, 32768};
  q.batch = 4;
  q.capacity_bytes = 80 * kGB;
  q.weights_bytes = 16 * kGB;
  return q;
}
double round2(double v) { return std::round(v * 100.0) / 100.0; }
}  // namespace

TEST_CASE("seed A: KV bytes per request for the 7B MHA model are exact", "[golden][kv]") {
  const auto rows = kv_table(seed_a_query());
  REQUIRE(rows.size() == 5);
  CHECK(rows[0].kv_bytes_per_request == 1'073'741'824);  // 2k: seed prints 1.07 GB
  CHECK(rows[1].kv_bytes_per_request == 2'147'483'648);
  CHECK(rows[2].kv_bytes_per_request == 4'294'967'296);
  CHECK(rows[3].kv_bytes_per_request == 8'589'934'592);
  CHECK(rows[4].kv_bytes_per_request == 17'179'869'184);
  CHECK(rows[4].kv_bytes_total == 68'719'476'736);
  CHECK(*rows[4].remaining_bytes == -4'719'476'736);
}

TEST_CASE("seed A: remaining memory and risk levels", "[golden][kv]") {
  const auto rows = kv_table(seed_a_query());
  CHECK(*rows[1].remaining_bytes == 55'410'065'408);  // exact 55.41 GB
  CHECK(*rows[2].remaining_bytes == 46'820'130'816);  // exact 46.82 GB
  CHECK(*rows[3].remaining_bytes == 29'640'261'632);  // 29.64 GB
  CHECK(rows[1].risk == Risk::kSafe);
  CHECK(rows[2].risk == Risk::kControlled);
  CHECK(rows[3].risk == Risk::kWarning);
  CHECK(rows[4].risk == Risk::kCritical);
}

TEST_CASE("seed A's printed 8.60/17.20/55.40/46.80 come from multiplying rounded figures",
          "[golden][kv]") {
  // The seed rounded the 4k per-request figure to 2 decimals (2.15 GB), doubled that for 8k
  // (4.30 GB; exact is 4.29 GB), and multiplied the rounded figures by 4.
  const auto rows = kv_table(seed_a_query());
  const double per_4k = round2(to_gb(rows[1].kv_bytes_per_request));  // 2.15
  const double per_8k = 2 * per_4k;                                   // the seed's 4.30
  CHECK(round2(to_gb(rows[2].kv_bytes_per_request)) == Approx(4.29));
  CHECK(round2(4 * per_4k) == Approx(8.60));
  CHECK(round2(4 * per_8k) == Approx(17.20));
  CHECK(round2(80 - 16 - 4 * per_4k) == Approx(55.40));
  CHECK(round2(80 - 16 - 4 * per_8k) == Approx(46.80));
  // The exact figures differ in the second decimal.
  CHECK(round2(to_gb(rows[1].kv_bytes_total)) == Approx(8.59));
  CHECK(round2(to_gb(rows[2].kv_bytes_total)) == Approx(17.18));
  CHECK(round2(to_gb(*rows[1].remaining_bytes)) == Approx(55.41));
  CHECK(round2(to_gb(*rows[2].remaining_bytes)) == Approx(46.82));
  // 16k and 32k agree either way.
  CHECK(round2(to_gb(rows[3].kv_bytes_total)) == Approx(34.36));
  CHECK(round2(to_gb(*rows[4].remaining_bytes)) == Approx(-4.72));
}

TEST_CASE("seed B: 524,288 bytes per token, GQA at 16k, batch 16 at 32k", "[golden][kv]") {
  ModelSpec m = Catalog::builtin().model("seed-7b-mha");
  CHECK(m.kv_bytes_per_token() == 524'288);
  // Seed B's "GQA (Group=8)" keeps 8 query heads per KV head: 32 / 8 = 4 KV heads -> 1.07 GB.
  ModelSpec gqa = m;
  gqa.kv_heads = 4;
  KvQuery q{.model = gqa, .seq_lens = {16384, 32768}, .batch = 1};
  auto rows = kv_table(q);
  CHECK(rows[0].kv_bytes_per_request == 1'073'741'824);
  CHECK(round2(to_gb(rows[0].kv_bytes_per_request)) == Approx(1.07));
  CHECK(round2(to_gb(rows[1].kv_bytes_per_request)) == Approx(2.15));  // GQA+Paged 32k row
  KvQuery b16{.model = m, .seq_lens = {32768}, .batch = 16};
  auto big = kv_table(b16);
  CHECK(big[0].kv_bytes_total == 274'877'906'944);
  CHECK(round2(to_gb(big[0].kv_bytes_total)) == Approx(274.88));
  // 4k and 32k per request: 2.15 GB and 17.18 GB.
  KvQuery one{.model = m, .seq_lens = {4096, 16384, 32768}, .batch = 1};
  auto r1 = kv_table(one);
  CHECK(round2(to_gb(r1[0].kv_bytes_per_request)) == Approx(2.15));
  CHECK(round2(to_gb(r1[1].kv_bytes_per_request)) == Approx(8.59));
  CHECK(round2(to_gb(r1[2].kv_bytes_per_request)) == Approx(17.18));
}

TEST_CASE("the real Llama-3-8B has 8 KV heads: a quarter of the seed's KV", "[golden][kv]") {
  const ModelSpec& real = Catalog::builtin().model("llama-3-8b");
  CHECK(real.kv_bytes_per_token() == 131'072);
  KvQuery q{.model = real, .seq_lens = {32768}, .batch = 4};
  auto rows = kv_table(q);
  CHECK(rows[0].kv_bytes_per_request == 4'294'967'296);
  CHECK(rows[0].kv_bytes_total == 17'179'869'184);
}

TEST_CASE("KV dtype and overflow", "[kv]") {
  ModelSpec m = Catalog::builtin().model("seed-7b-mha");
  m.kv_dtype = DType::kFp8;
  CHECK(m.kv_bytes_per_token() == 262'144);
  KvQuery q{.model = m, .seq_lens = {int64_t{1} << 50}, .batch = 1 << 20};
  CHECK_THROWS_WITH(kv_table(q), Catch::Matchers::Contains("overflow"));
  CHECK(classify_risk(std::nullopt, 80 * kGB) == Risk::kUnknown);
}
