// KVSIM_CHECK: invariant checks that stay on in release builds and throw InvariantError with the
// source position, so a broken invariant is a reported bug, never silent corruption.
#pragma once

#include <fmt/format.h>

#include "core/errors.h"

namespace kvsim::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond,
                               const std::string& msg);
}  // namespace kvsim::detail

#define KVSIM_CHECK(cond, ...)                                                            \
  do {                                                                                    \
    if (!(cond)) [[unlikely]] {                                                           \
      ::kvsim::detail::check_failed(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
    }                                                                                     \
  } while (0)
