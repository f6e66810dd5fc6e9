#include "models/hf_json.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/echo_text.h"

namespace kvsim {

namespace {

// Builds the document as nlohmann's own DOM parser does, but keeps where the parse stopped and
// why for every error the parser reports, not only syntax errors: a number too large for a
// double ("1e400") is reported the same way, with its position.
class PositionedDomBuilder : public nlohmann::json_sax<HfJson> {
 public:
  explicit PositionedDomBuilder(HfJson& root) : dom_(root, /*allow_exceptions=*/false) {}
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
  // Set when the parser reported an error.
  std::optional<JsonParseError> error() const {
    if (what_.empty()) return std::nullopt;
    return JsonParseError{position_, what_};
  }

 private:
  nlohmann::detail::json_sax_dom_parser<HfJson> dom_;
  std::size_t position_ = 0;
  std::string what_;
};

}  // namespace

// "line:col" (1-based) of byte offset `at` of `text`.
std::string hf_line_col(const std::string& text, size_t at) {
  at = std::min(at, text.size());
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return fmt::format("{}:{}", line, at - line_start + 1);
}

// What a value is, for "got ..." in a message: a scalar as written (a string cut and escaped), a
// list or an object by its kind and size. Never the value's dump: a key holding a 100,000-deep
// list would make a 100 KB message, or overflow the stack while dumping it.
std::string hf_describe(const HfJson& v) {
  switch (v.type()) {
    case HfJson::value_t::string:
      return fmt::format("\"{}\"", echo_text(v.get_ref<const std::string&>()));
    case HfJson::value_t::array: return fmt::format("a list of {} element(s)", v.size());
    case HfJson::value_t::object: return fmt::format("an object of {} key(s)", v.size());
    case HfJson::value_t::null: return "null";
    default: return v.dump();  // a number or a boolean: short
  }
}

// nlohmann's message without its "[json.exception.<kind>.<id>] " prefix and "parse error at line
// L, column C: " (kvsim says where itself), with the quoted input it echoes ("last read:
// '...'", "number overflow parsing '...'") cut and escaped.
std::string hf_json_detail(const std::string& what) {
  std::string d = what;
  if (d.rfind("[json.exception.", 0) == 0) {
    if (const size_t end = d.find("] "); end != std::string::npos) d = d.substr(end + 2);
  }
  if (d.rfind("parse error", 0) == 0) {
    if (const size_t colon = d.find(": "); colon != std::string::npos) d = d.substr(colon + 2);
  }
  const size_t open = d.find('\''), close = d.rfind('\'');
  if (open == std::string::npos || close <= open) return echo_text(d, 200);
  return echo_text(d.substr(0, open + 1), 200) + echo_text(d.substr(open + 1, close - open - 1)) +
         echo_text(d.substr(close), 200);
}

// The document, or an InputError naming where the parse stopped: a syntax error, or a number
// out of range ("1e400"). nlohmann reports the 1-based offset of the last character it read
// (the end of the offending token).
std::optional<JsonParseError> parse_json_positioned(const std::string& text, HfJson& out) {
  PositionedDomBuilder builder(out);
  const bool parsed = HfJson::sax_parse(text, &builder);
  if (parsed && !builder.error()) return std::nullopt;
  return builder.error().value_or(JsonParseError{});
}

HfJson hf_parse(const std::string& text, const std::string& source) {
  HfJson j;
  if (const auto error = parse_json_positioned(text, j)) {
    throw InputError(fmt::format("{}:{}: malformed JSON: {}", source,
                                 hf_line_col(text, error->offset()), error->detail()));
  }
  if (!j.is_object()) {
    throw InputError(
        fmt::format("{}:1:1: expected a config.json object, got {}", source, j.type_name()));
  }
  return j;
}

bool HfReader::boolean(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const HfJson& v = j_.at(key);
  if (!v.is_boolean()) {
    fail(key, fmt::format("'{}': expected true or false, got {}", key, hf_describe(v)));
  }
  return v.get<bool>();
}

std::string HfReader::string(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const HfJson& v = j_.at(key);
  if (!v.is_string()) {
    fail(key, fmt::format("'{}': expected a string, got {}", key, hf_describe(v)));
  }
  return v.get<std::string>();
}

std::vector<int64_t> HfReader::int_list(const std::string& key, int64_t max) const {
  std::vector<int64_t> out;
  if (!has(key)) return out;
  const HfJson& v = j_.at(key);
  if (!v.is_array()) fail(key, fmt::format("'{}': expected a list of integers", key));
  for (const HfJson& e : v) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > max) {
      fail(key, fmt::format("'{}': expected integers in [0, {}], got {}", key, max, e.dump()));
    }
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::vector<std::string> HfReader::string_list(const std::string& key) const {
  std::vector<std::string> out;
  if (!has(key)) return out;
  const HfJson& v = j_.at(key);
  if (!v.is_array()) fail(key, fmt::format("'{}': expected a list of strings", key));
  for (const HfJson& e : v) {
    if (!e.is_string()) {
      fail(key, fmt::format("'{}': expected strings, got {}", key, hf_describe(e)));
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

}  // namespace kvsim
