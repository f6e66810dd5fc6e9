// Field parsers: exact decimal times, integers, Azure date-times with and without offsets.
#include <catch2/catch.hpp>

#include "workloads/traces/field_parse.h"

using namespace kvsim::trace_detail;

TEST_CASE("decimal times convert exactly to integer units", "[trace][parse]") {
  CHECK(parse_decimal_fixed("0.000", 9) == 0);
  CHECK(parse_decimal_fixed("4.315", 9) == 4'315'000'000);
  CHECK(parse_decimal_fixed("5.8926549999999995", 9) == 5'892'655'000);  // rounded on digit 10
  CHECK(parse_decimal_fixed(" 12 ", 9) == 12'000'000'000);
  CHECK(parse_decimal_fixed(".5", 9) == 500'000'000);
  CHECK(parse_decimal_fixed("3000", 6) == 3'000'000'000);  // Mooncake ms -> ns
  CHECK(parse_decimal_fixed("1e-05", 9) == 10'000);
  CHECK(!parse_decimal_fixed("-1", 9));
  // Negative zero is zero (an acceptance_rate of 0 or a time of 0 written by numpy as "-0"), as
  // "-0e0" always was through the double; a negative below the last digit kept is still refused.
  CHECK(parse_decimal_fixed("-0", 9) == 0);
  CHECK(parse_decimal_fixed("-0.000", 9) == 0);
  CHECK(parse_decimal_fixed("-0e0", 9) == 0);
  CHECK(!parse_decimal_fixed("-0.0000000001", 9));
  CHECK(!parse_decimal_fixed("-.", 9));
  CHECK(!parse_decimal_fixed("-", 9));
  CHECK(!parse_decimal_fixed("--0", 9));
  CHECK(!parse_decimal_fixed("1.2.3", 9));
  CHECK(!parse_decimal_fixed("", 9));
  CHECK(!parse_decimal_fixed(".", 9));
  CHECK(!parse_decimal_fixed("99999999999", 9));  // overflows int64 ns
  CHECK(!parse_decimal_fixed("nan", 9));
}

TEST_CASE("integers, with a tolerated .0 fraction", "[trace][parse]") {
  CHECK(parse_int("374") == 374);
  CHECK(parse_int("374.0") == 374);
  CHECK(parse_int("-3") == -3);  // callers check >= 1
  CHECK(!parse_int("374.5"));
  CHECK(!parse_int("3x"));
  CHECK(!parse_int(""));
  CHECK(!parse_int("99999999999999999999"));
}

TEST_CASE("date-times: Azure 2023, 2024 with offset, ISO T and Z", "[trace][parse]") {
  const auto t0 = parse_datetime_ns("2023-11-16 18:17:03.9799600");
  REQUIRE(t0);
  CHECK(*t0 == 1'700'158'623'979'960'000);  // date -u -d '2023-11-16 18:17:03' +%s = 1700158623
  CHECK(parse_datetime_ns("2023-11-16T18:17:03.9799600Z") == t0);
  CHECK(parse_datetime_ns("2024-05-10 00:00:00.009930+00:00") == 1'715'299'200'009'930'000);
  CHECK(parse_datetime_ns("2024-05-10 02:00:00+02:00") == 1'715'299'200'000'000'000);
  CHECK(parse_datetime_ns("2024-02-29 00:00:00") == 1'709'164'800'000'000'000);
  CHECK(!parse_datetime_ns("2023-11-16 25:17:03"));
  CHECK(!parse_datetime_ns("2023-11-16"));
  CHECK(!parse_datetime_ns("2023-11-16 18:17:03.97 junk"));
  CHECK(!parse_datetime_ns("16/11/2023 18:17:03"));
}
