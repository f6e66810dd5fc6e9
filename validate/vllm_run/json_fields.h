// Reads the keys of one JSON object of a measured run (meta.json's engine_kwargs, a
// requests.jsonl line, a bench serve result), naming the file and the key's place in one-line
// errors, and describing a wrong value rather than dumping it (json_input.h).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "validate/vllm_run/json_input.h"

namespace kvsim::validate {

class JsonFields {
 public:
  using Json = nlohmann::json;
  // `line` > 0: the object is that line of a JSON-lines file (errors name file:line).
  JsonFields(const Json& j, const std::string& text, std::string where, int line = 0)
      : j_(j), text_(text), where_(std::move(where)), line_(line) {}

  // "file:line:col" of `"key"` in the text (its start when the key is not there), or file:line.
  std::string place(const std::string& key) const {
    if (line_ > 0) return fmt::format("{}:{}", where_, line_);
    const size_t at = text_.find("\"" + key + "\"");
    return fmt::format("{}:{}", where_, json_line_col(text_, at == std::string::npos ? 0 : at));
  }
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    throw InputError(fmt::format("{}: {}", place(key), msg));
  }
  const Json& json() const { return j_; }
  const std::string& text() const { return text_; }
  const std::string& where() const { return where_; }
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const Json& at(const std::string& key) const {
    if (!has(key)) fail(key, fmt::format("no '{}'", key));
    return j_.at(key);
  }
  double number(const std::string& key) const {
    const Json& v = at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      fail(key, fmt::format("'{}': expected a number, got {}", key, describe_json(v)));
    }
    return v.get<double>();
  }
  int64_t integer(const std::string& key, int64_t min, int64_t max) const {
    const Json& v = at(key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max)) ||
        v.get<int64_t>() < min || v.get<int64_t>() > max) {
      fail(key, fmt::format("'{}': expected an integer in [{}, {}], got {}", key, min, max,
                            describe_json(v)));
    }
    return v.get<int64_t>();
  }
  std::optional<int64_t> opt_integer(const std::string& key, int64_t min, int64_t max) const {
    if (!has(key)) return std::nullopt;
    return integer(key, min, max);
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const Json& v = j_.at(key);
    if (!v.is_string())
      fail(key, fmt::format("'{}': expected a string, got {}", key, describe_json(v)));
    return v.get<std::string>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const Json& v = j_.at(key);
    if (!v.is_boolean()) {
      fail(key, fmt::format("'{}': expected true or false, got {}", key, describe_json(v)));
    }
    return v.get<bool>();
  }

 private:
  const Json& j_;
  const std::string& text_;
  std::string where_;
  int line_;
};

}  // namespace kvsim::validate
