// InputError's message is the line kvsim prints through what(), a C string: a NUL byte the input
// carried into it (a YAML "\0" escape) ended the line there. It is written \x00, as echo_text
// writes control bytes; ConfigError, built on it, does the same.
#include <catch2/catch.hpp>
#include <string>

#include "core/errors.h"

using namespace kvsim;

TEST_CASE("a NUL byte in an error message is written escaped", "[core][errors]") {
  const std::string message("path a\0b not found: a\0\0", 23);
  CHECK(std::string(InputError(message).what()) == "path a\\x00b not found: a\\x00\\x00");
  CHECK(std::string(ConfigError(message).what()) == "path a\\x00b not found: a\\x00\\x00");
  CHECK(std::string(InputError(std::string("plain")).what()) == "plain");
}
