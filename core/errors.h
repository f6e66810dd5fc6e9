// The error types kvsim throws. Library code throws; only main() catches everything, prints one
// line and exits non-zero (exit code 2 for bad input, 3 for a broken invariant).
#pragma once

#include <stdexcept>
#include <string>

namespace kvsim {

// Bad user input: a scenario, catalog, trace, profile or command-line value. The message is
// complete and one line, e.g. "run.yaml:14:31: policies[1].guards[0].safety_margin_gb: expected
// a number >= 0, got \"ten\"".
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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
