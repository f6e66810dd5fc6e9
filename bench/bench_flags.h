// The benches' command lines: `--name VALUE` flags read by hand, so that a bench links no flags
// library and each flag's value check (a value must follow) is written once.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>

namespace kvsim::bench {

// When argv[i] is `name` and a value follows it: reads the value into `out` (a whole number as
// std::atoll reads it, a real one as std::atof, else the text), steps i onto it and returns
// true. Else returns false and leaves i and `out` as they were.
template <typename T>
bool read_flag(int argc, char** argv, int& i, std::string_view name, T& out) {
  if (name != argv[i] || i + 1 >= argc) return false;
  const char* value = argv[++i];
  if constexpr (std::is_same_v<T, std::string>) {
    out = value;
  } else if constexpr (std::is_floating_point_v<T>) {
    out = std::atof(value);
  } else {
    static_assert(std::is_integral_v<T>);
    out = static_cast<T>(std::atoll(value));
  }
  return true;
}

}  // namespace kvsim::bench
