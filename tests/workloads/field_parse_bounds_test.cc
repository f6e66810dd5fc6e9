// Datetimes at the edges of int64 nanoseconds. Regression for a crash found by
// fuzz_trace_azure: year 0437 overflowed `seconds * 1e9` (signed overflow, undefined behaviour).
#include <catch2/catch.hpp>

#include "workloads/traces/field_parse.h"

using kvsim::trace_detail::parse_datetime_ns;

TEST_CASE("datetimes outside int64 nanoseconds are rejected, not wrapped", "[trace][bounds]") {
  CHECK_FALSE(parse_datetime_ns("0437-11-16 18:17:03.9799600"));
  CHECK_FALSE(parse_datetime_ns("0000-01-01 00:00:00"));
  CHECK_FALSE(parse_datetime_ns("9999-12-31 23:59:59"));
  // The last representable second of 1677 and of 2262 bracket the range: 2^63 ns is
  // 2262-04-11 23:47:16.854775807 and -2^63 ns is 1677-09-21 00:12:43.145224192.
  CHECK(parse_datetime_ns("2262-04-11 23:47:16") == int64_t{9'223'372'036'000'000'000});
  CHECK_FALSE(parse_datetime_ns("2262-04-11 23:47:17"));
  CHECK_FALSE(parse_datetime_ns("2262-04-11 23:47:16.9"));
  CHECK(parse_datetime_ns("1677-09-21 00:12:44") == int64_t{-9'223'372'036'000'000'000});
  CHECK_FALSE(parse_datetime_ns("1677-09-21 00:12:43"));
  CHECK(parse_datetime_ns("1970-01-01 00:00:00") == 0);
}
