// The one place a kvsim program turns an escaping error into one line on stderr and an exit code:
// 2 bad input (and command-line errors), 3 broken internal invariant, 4 anything else. Header-only
// so that each executable (kvsim, kvsim-validate) uses it with its own CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "core/errors.h"

namespace kvsim {

// Parses and runs the app's callbacks. Returns `ok_code` on success.
inline int parse_and_report(CLI::App& app, int argc, char** argv, const char* program,
                            int ok_code = 0) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print their text and succeed; a command-line error is one line like
    // every other error ("kvsim: error: --dp: Value 0 not in range 1 to 1024").
    if (e.get_exit_code() == 0) return app.exit(e);
    fmt::print(stderr, "{}: error: {}\n", program, e.what());
    return 2;
  } catch (const InputError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "{}: error: {}\n", program, e.what());
    return 2;
  } catch (const InvariantError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "{}: internal error (please report): {}\n", program, e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "{}: error: {}\n", program, e.what());
    return 4;
  }
  return ok_code;
}

}  // namespace kvsim
