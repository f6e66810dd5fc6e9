// The error types kvsim throws. Library code throws; only main() catches everything, prints one
// line and exits non-zero (exit code 2 for bad input, 3 for a broken invariant).
#pragma once

#include <stdexcept>
#include <string>

namespace kvsim {

// Bad user input: a scenario, catalog, trace, profile or command-line value. The message is
// complete and one line, e.g. "run.yaml:14:31: policies[1].guards[0].safety_margin_gb: expected
// a number >= 0, got \"ten\"".
// A NUL byte the input carried into the message (a YAML "\0" escape in a path, say) is written
// "\x00", as echo_text writes control bytes: raw, it would end what() and cut the line short.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(escape_nul(message)) {}
  explicit InputError(const char* message) : std::runtime_error(message) {}

 private:
  static std::string escape_nul(std::string s) {
    for (size_t at = s.find('\0'); at != std::string::npos; at = s.find('\0', at + 4)) {
      s.replace(at, 1, "\\x00");
    }
    return s;
  }
};

// A YAML document that is malformed or does not match the schema.
class ConfigError : public InputError {
 public:
  using InputError::InputError;
};

// A broken internal invariant (a kvsim bug, never a user mistake).
class InvariantError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace kvsim
