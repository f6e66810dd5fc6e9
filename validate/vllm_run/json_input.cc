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

// nlohmann's DOM builder that keeps where the parse stopped and why for every error the parser
// reports, a number too large for a double included (nlohmann's own parse() throws that one
// without a position).
class PositionedDom : public nlohmann::json_sax<Json> {
 public:
  explicit PositionedDom(Json& root) : dom_(root, /*allow_exceptions=*/false) {}
  bool null() override { return dom_.null(); }
  bool boolean(bool v) override { return dom_.boolean(v); }
  bool number_integer(number_integer_t v) override { return dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) override { return dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) override {
    return dom_.number_float(v, s);
  }
  bool string(string_t& v) override { return dom_.string(v); }
  bool binary(binary_t& v) override { return dom_.binary(v); }
  bool start_object(std::size_t n) override { return dom_.start_object(n); }
  bool key(string_t& k) override { return dom_.key(k); }
  bool end_object() override { return dom_.end_object(); }
  bool start_array(std::size_t n) override { return dom_.start_array(n); }
  bool end_array() override { return dom_.end_array(); }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    position_ = position;
    what_ = e.what();
    return false;
  }
  bool failed() const { return !what_.empty(); }
  std::size_t position() const { return position_; }  // 1-based: the last character read
  const std::string& what() const { return what_; }

 private:
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  std::size_t position_ = 0;
  std::string what_;
};

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
  PositionedDom builder(j);
  if (!Json::sax_parse(text, &builder) || builder.failed()) {
    const size_t at = builder.position() > 0 ? builder.position() - 1 : 0;
    throw InputError(fmt::format("{}: malformed JSON: {}", place(text, where, line, at),
                                 builder.failed() ? hf_json_detail(builder.what()) : "unreadable"));
  }
  return j;
}

std::string describe_json(const Json& v) { return hf_describe(v); }

}  // namespace kvsim::validate
