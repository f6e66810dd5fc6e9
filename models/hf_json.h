// Reading a Hugging Face config.json: the parse that keeps where it stopped, and a reader of
// keys that names the file and the key's line:col in its one-line errors. hf_config.cc and
// hf_families.cc read models with it.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/errors.h"

namespace kvsim {

using HfJson = nlohmann::json;

// "line:col" (1-based) of byte offset `at` of `text`.
std::string hf_line_col(const std::string& text, size_t at);
// What a value is, for "got ..." in a message: a scalar as written (a string cut and escaped), a
// list or an object by its kind and size, never the value's dump.
std::string hf_describe(const HfJson& v);
// nlohmann's message without its exception prefix and position (kvsim says where itself).
std::string hf_json_detail(const std::string& what);
// Where and why a JSON parse stopped.
struct JsonParseError {
  size_t position = 0;  // 1-based: the last character read (0: none)
  std::string what;     // nlohmann's message ("" when the parser gave none)
  // The 0-based offset to name: the last character read.
  size_t offset() const { return position > 0 ? position - 1 : 0; }
  // The message for "malformed JSON: ...": hf_json_detail's, or "unreadable".
  std::string detail() const { return what.empty() ? "unreadable" : hf_json_detail(what); }
};
// Parses `text` into `out` as nlohmann's DOM parser does, keeping where the parse stopped and
// why for every error the parser reports (a number too large for a double, "1e400", included:
// nlohmann's own parse() throws that one without a position). nullopt when it parsed. Every
// reader of JSON input (config.json here, vllm-run's files) parses through it.
std::optional<JsonParseError> parse_json_positioned(const std::string& text, HfJson& out);
// The document, or an InputError naming where the parse stopped.
HfJson hf_parse(const std::string& text, const std::string& source);

// Reads keys of one object of a config.json (the top level, or a text_config inside it), naming
// the file and the key's place in messages.
class HfReader {
 public:
  HfReader(const HfJson& j, const std::string& text, const std::string& source)
      : j_(j), text_(text), source_(source) {}

  const HfJson& json() const { return j_; }
  const std::string& text() const { return text_; }
  const std::string& source() const { return source_; }
  // "file:line:col" of `"key"` in the text (the file's start when it is not there).
  std::string where(const std::string& key) const {
    const size_t at = text_.find("\"" + key + "\"");
    return fmt::format("{}:{}", source_, hf_line_col(text_, at == std::string::npos ? 0 : at));
  }
  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw InputError(fmt::format("{}: {}", where(key), message));
  }
  // A key present and not null.
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  int64_t integer(const std::string& key, int64_t min, int64_t max) const {
    if (!has(key)) fail(key, fmt::format("config.json has no '{}'", key));
    return integer_at(key, min, max);
  }
  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) const {
    return has(key) ? integer_at(key, min, max) : fallback;
  }
  bool boolean(const std::string& key, bool fallback) const;
  std::string string(const std::string& key, const std::string& fallback) const;
  // An integer list (e.g. mlp_only_layers), each in [0, max]; empty when absent or null.
  std::vector<int64_t> int_list(const std::string& key, int64_t max) const;
  // A list of strings (e.g. layer_types); empty when absent or null.
  std::vector<std::string> string_list(const std::string& key) const;

 private:
  int64_t integer_at(const std::string& key, int64_t min, int64_t max) const {
    const HfJson& v = j_.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max) {
      fail(key, fmt::format("'{}': expected an integer in [{}, {}], got {}", key, min, max,
                            hf_describe(v)));
    }
    return v.get<int64_t>();
  }

  const HfJson& j_;
  const std::string& text_;
  const std::string& source_;
};

}  // namespace kvsim
