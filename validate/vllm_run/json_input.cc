#include "validate/vllm_run/json_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/errors.h"
#include "models/hf_json.h"

namespace kvsim::validate {

namespace {

using Json = nlohmann::json;

// The byte offset of the first '[' or '{' that opens level kMaxJsonDepth + 1 (strings skipped),
// or nullopt. Checked before the parse so that no value deeper than the bound is ever built.
std::optional<size_t> too_deep_at(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

std::string place(const std::string& text, const std::string& where, int line, size_t at) {
  if (line <= 0) return fmt::format("{}:{}", where, json_line_col(text, at));
  return fmt::format("{}:{}:{}", where, line, std::min(at, text.size()) + 1);
}

}  // namespace

std::string json_line_col(const std::string& text, size_t at) { return hf_line_col(text, at); }

Json parse_json_input(const std::string& text, const std::string& where, int line) {
  if (const auto at = too_deep_at(text)) {
    throw InputError(fmt::format("{}: malformed JSON: nested deeper than {} levels",
                                 place(text, where, line, *at), kMaxJsonDepth));
  }
  Json j;
  if (const auto error = parse_json_positioned(text, j)) {
    throw InputError(fmt::format("{}: malformed JSON: {}",
                                 place(text, where, line, error->offset()), error->detail()));
  }
  return j;
}

std::string describe_json(const Json& v) { return hf_describe(v); }

}  // namespace kvsim::validate
