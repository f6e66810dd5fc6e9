#include "workloads/traces/field_parse.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "core/units.h"

namespace kvsim::trace_detail {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

constexpr int64_t kPow10[] = {1,       10,       100,       1000,       10000,        100000,
                              1000000, 10000000, 100000000, 1000000000, 10000000000LL};

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// Exactly `n` digits at s[pos..pos+n) as a number, or -1.
int64_t fixed_digits(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return -1;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (!is_digit(s[i])) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

}  // namespace

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<int64_t> parse_decimal_fixed(std::string_view s, int digits) {
  s = trim(s);
  if (s.empty() || digits < 0 || digits > 10) return std::nullopt;
  // An exponent ('e' or 'E', the only characters whose lower-case bit makes 'e'): one pass,
  // where find_first_of looked each character up in the set.
  if (std::any_of(s.begin(), s.end(), [](char c) { return (c | 0x20) == 'e'; })) {
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v) || v < 0) {
      return std::nullopt;
    }
    double scaled = v * static_cast<double>(kPow10[digits]);
    if (scaled >= 9.2e18) return std::nullopt;
    return static_cast<int64_t>(std::llround(scaled));
  }
  // Negative zero ("-0", "-0.000", as numpy writes a rounded negative) is zero, as "-0e0" already
  // was through the double; any other minus sign is a negative number.
  if (s[0] == '-') {
    const std::string_view rest = s.substr(1);
    // Zeros and points only: the rest reads as 0, or not at all ("-.", "-0.0.0").
    if (rest.empty() || rest.find_first_not_of("0.") != std::string_view::npos) return std::nullopt;
    return parse_decimal_fixed(rest, digits);
  }
  size_t i = 0;
  int64_t whole = 0;
  const size_t whole_start = i;
  while (i < s.size() && is_digit(s[i])) {
    if (whole > (std::numeric_limits<int64_t>::max() - 9) / 10) return std::nullopt;
    whole = whole * 10 + (s[i] - '0');
    ++i;
  }
  bool any_digit = i > whole_start;
  int64_t frac = 0;
  int frac_digits = 0;
  bool round_up = false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    const size_t frac_start = i;
    while (i < s.size() && is_digit(s[i])) {
      if (frac_digits < digits) {
        frac = frac * 10 + (s[i] - '0');
        ++frac_digits;
      } else if (i == frac_start + static_cast<size_t>(digits)) {
        round_up = s[i] >= '5';
      }
      ++i;
    }
    any_digit = any_digit || i > frac_start;
  }
  if (!any_digit || i != s.size()) return std::nullopt;
  frac *= kPow10[digits - frac_digits];
  int64_t out = 0;
  if (__builtin_mul_overflow(whole, kPow10[digits], &out)) return std::nullopt;
  if (__builtin_add_overflow(out, frac + (round_up ? 1 : 0), &out)) return std::nullopt;
  return out;
}

std::optional<int64_t> parse_int(std::string_view s) {
  s = trim(s);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  if (p != s.data() + s.size()) {
    // Accept "123.0" / "123." as written by tools that store counts as floats.
    if (*p != '.') return std::nullopt;
    for (++p; p != s.data() + s.size(); ++p) {
      if (*p != '0') return std::nullopt;
    }
  }
  return v;
}

std::optional<int64_t> parse_datetime_ns(std::string_view s) {
  s = trim(s);
  const int64_t year = fixed_digits(s, 0, 4), month = fixed_digits(s, 5, 2),
                day = fixed_digits(s, 8, 2), hour = fixed_digits(s, 11, 2),
                minute = fixed_digits(s, 14, 2), second = fixed_digits(s, 17, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 ||
      minute < 0 || minute > 59 || second < 0 || second > 60 || s[4] != '-' || s[7] != '-' ||
      (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  size_t i = 19;
  int64_t frac_ns = 0;
  if (i < s.size() && s[i] == '.') {
    size_t start = ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i == start) return std::nullopt;
    auto f = parse_decimal_fixed(s.substr(start - 1, i - start + 1), 9);  // ".fffffff"
    if (!f) return std::nullopt;
    frac_ns = *f;
  }
  int64_t offset_s = 0;
  if (i < s.size()) {
    if (s[i] == 'Z' && i + 1 == s.size()) {
      ++i;
    } else if ((s[i] == '+' || s[i] == '-') && s.size() == i + 6 && s[i + 3] == ':') {
      const int64_t oh = fixed_digits(s, i + 1, 2), om = fixed_digits(s, i + 4, 2);
      if (oh < 0 || om < 0 || oh > 23 || om > 59) return std::nullopt;
      offset_s = (s[i] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
      i = s.size();
    } else {
      return std::nullopt;
    }
  }
  const int64_t secs =
      days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  // int64 nanoseconds since 1970 span only the years 1677-2262; a date outside them is not a
  // time we can hold (fuzz_trace_azure found year 0437 overflowing here).
  const auto ns = checked_mul(secs, 1'000'000'000);
  if (!ns) return std::nullopt;
  return checked_add(*ns, frac_ns);
}

std::string quote(std::string_view s) {
  constexpr size_t kMax = 80;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMax) out += "...";
  return out;
}

}  // namespace kvsim::trace_detail
