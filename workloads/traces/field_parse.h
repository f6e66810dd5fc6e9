// Field parsers shared by the trace readers: exact decimal times to integer nanoseconds, token
// counts, Azure date-times, and the quoting of bad content in one-line error messages. All use
// std::from_chars or hand-written digit loops (no locale, no iostream, no regex).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvsim::trace_detail {

// Strips spaces and tabs at both ends.
std::string_view trim(std::string_view s);

// A non-negative decimal number of units, e.g. "12.5" seconds, converted exactly to an integer
// count of 10^-`digits` units (rounded half up on the first dropped digit): with digits = 9,
// "0.0519600" -> 51'960'000 ns. Exponent forms ("1e-05") go through a double. nullopt when the
// text is not such a number or the result overflows int64.
std::optional<int64_t> parse_decimal_fixed(std::string_view s, int digits);

// An integer (optionally written with a ".0" fraction, as pandas does for float columns).
std::optional<int64_t> parse_int(std::string_view s);

// "YYYY-MM-DD HH:MM:SS[.f...][Z|+HH:MM|-HH:MM]" (a 'T' may replace the space) to ns since the
// Unix epoch (UTC when no offset is given). nullopt when malformed.
std::optional<int64_t> parse_datetime_ns(std::string_view s);

// The text quoted for an error message: control bytes escaped, cut to ~80 characters.
std::string quote(std::string_view s);

}  // namespace kvsim::trace_detail
