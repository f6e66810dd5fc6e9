// split_csv_line: the one splitter of the CSV files the project reads back.
#include <catch2/catch.hpp>

#include "core/csv_line.h"

using kvsim::split_csv_line;

TEST_CASE("a CSV line splits into its fields, quotes and all", "[core][csv]") {
  std::vector<std::string> f;
  // Plain fields, an empty one, and a trailing '\r' from a file written on Windows.
  REQUIRE(split_csv_line("a,,3.5\r", f));
  CHECK(f == std::vector<std::string>{"a", "", "3.5"});
  // A quoted field keeps its commas; "" inside quotes is one quote.
  REQUIRE(split_csv_line(R"(x,"p,""q""",z)", f));
  CHECK(f == std::vector<std::string>{"x", R"(p,"q")", "z"});
  // A quote after the field's first character is text, not an opening quote.
  REQUIRE(split_csv_line(R"(ab"c,d)", f));
  CHECK(f == std::vector<std::string>{R"(ab"c)", "d"});
  // An empty line is one empty field.
  REQUIRE(split_csv_line("", f));
  CHECK(f == std::vector<std::string>{""});
  // An unclosed quote is reported.
  CHECK_FALSE(split_csv_line(R"(a,"open)", f));
}
