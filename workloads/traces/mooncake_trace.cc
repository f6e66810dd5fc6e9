// Mooncake's JSONL trace: one object per line, {"timestamp": ms, "input_length": n,
// "output_length": n, "hash_ids": [..]}. A small hand-written scanner (no DOM) reads the keys it
// needs and skips any others, because a generic JSON parser per line would cost more than the
// rest of the replay.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

#include "workloads/traces/field_parse.h"
#include "workloads/traces/row_parser.h"

namespace kvsim {

namespace {

// Mooncake's hash_ids each name one block of this many prompt tokens.
constexpr int64_t kMooncakeBlockTokens = 512;
constexpr int kMaxDepth = 64;

class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool at_end() {
    ws();
    return i_ == s_.size();
  }
  char peek() {
    ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  // A JSON string's raw content (escapes left as written); nullopt if not a string.
  std::optional<std::string_view> string() {
    if (!eat('"')) return std::nullopt;
    size_t start = i_;
    while (i_ < s_.size() && s_[i_] != '"') i_ += s_[i_] == '\\' ? 2 : 1;
    if (i_ >= s_.size()) return std::nullopt;
    return s_.substr(start, i_++ - start);
  }
  // A number token's text (validated by the caller).
  std::string_view number() {
    ws();
    size_t start = i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' ||
                              s_[i_] == '+' || s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
    }
    return s_.substr(start, i_ - start);
  }
  // Skips any JSON value; false when malformed.
  bool skip_value(int depth = 0) {
    if (depth > kMaxDepth) return false;
    char c = peek();
    if (c == '"') return string().has_value();
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++i_;
      if (eat(close)) return true;
      do {
        if (c == '{' && (!string() || !eat(':'))) return false;
        if (!skip_value(depth + 1)) return false;
      } while (eat(','));
      return eat(close);
    }
    size_t start = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']' && s_[i_] != ' ') ++i_;
    return i_ > start;
  }
  // The unsigned integers of a list up to its ']' (the hot loop: a Mooncake row has 24 on
  // average), appended to `out`. Stops at the first malformed item, leaving the cursor there;
  // false then.
  bool uint_list(std::vector<uint64_t>& out) {
    const char* p = s_.data() + i_;
    const char* const end = s_.data() + s_.size();
    while (true) {
      while (p < end && *p == ' ') ++p;
      const char* start = p;
      uint64_t v = 0;
      while (p < end && static_cast<unsigned>(*p - '0') < 10) v = v * 10 + (*p++ - '0');
      if (p == start || p - start > 19) {  // not a number, or one that may have wrapped
        if (p - start == 20 && std::from_chars(start, p, v).ec == std::errc()) {
          // A 20-digit id that fits in uint64.
        } else {
          i_ = static_cast<size_t>(start - s_.data());
          return false;
        }
      }
      out.push_back(v);
      while (p < end && *p == ' ') ++p;
      if (p < end && *p == ',') {
        ++p;
        continue;
      }
      i_ = static_cast<size_t>(p - s_.data());
      return true;
    }
  }
  // The unread rest of the line, for messages.
  std::string_view rest() {
    ws();
    return s_.substr(i_);
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

class MooncakeRowParser final : public RowParser {
 public:
  MooncakeRowParser(std::unique_ptr<LineReader> lines, std::string first_line)
      : lines_(std::move(lines)), pending_(std::move(first_line)), has_pending_(true) {}

  bool next(RawRow& row) override {
    std::string_view line;
    if (has_pending_) {
      has_pending_ = false;
      line = pending_;
    } else {
      do {
        if (!lines_->next(line)) return false;
      } while (trace_detail::trim(line).empty());
    }
    parse(line, row);
    return true;
  }

  const std::string& time_column() const override { return time_name_; }
  const LineReader& lines() const override { return *lines_; }

 private:
  [[noreturn]] void bad(std::string_view what, std::string_view got) const {
    throw TraceRowError(row_error(*lines_, what, got));
  }

  int64_t count(std::string_view key, std::string_view text) const {
    auto v = trace_detail::parse_int(text);
    if (!v || *v < 1) bad(fmt::format("{}: expected an integer >= 1", key), text);
    return *v;
  }

  void parse(std::string_view line, RawRow& row) {
    static constexpr const char* kShape =
        "expected a JSON object {\"timestamp\": ms, \"input_length\": n, \"output_length\": n, "
        "\"hash_ids\": [..]}";
    Cursor c(line);
    bool have_t = false, have_in = false, have_out = false;
    row.prefix_hashes.clear();
    row.hash_block_tokens = 0;
    if (!c.eat('{')) bad(kShape, line);
    if (!c.eat('}')) {
      do {
        auto key = c.string();
        if (!key || !c.eat(':')) bad(kShape, line);
        if (*key == "timestamp") {
          std::string_view t = c.number();
          auto ns = trace_detail::parse_decimal_fixed(t, 6);  // ms -> ns
          if (!ns) bad("timestamp: expected a number of milliseconds >= 0", t);
          row.time_ns = *ns;
          row.time_text = t;
          have_t = true;
        } else if (*key == "input_length") {
          row.prompt_tokens = count("input_length", c.number());
          have_in = true;
        } else if (*key == "output_length") {
          row.output_tokens = count("output_length", c.number());
          have_out = true;
        } else if (*key == "hash_ids") {
          parse_hashes(c, line, row, have_in ? row.prompt_tokens : 0);
        } else if (!c.skip_value()) {
          bad(kShape, line);
        }
      } while (c.eat(','));
      if (!c.eat('}')) bad(kShape, line);
    }
    if (!c.at_end()) bad("expected the end of the line after the JSON object", line);
    if (!have_t) bad("expected the key \"timestamp\"", line);
    if (!have_in) bad("expected the key \"input_length\"", line);
    if (!have_out) bad("expected the key \"output_length\"", line);
  }

  // `prompt_tokens` is input_length when it came first (it does in Mooncake), else 0.
  void parse_hashes(Cursor& c, std::string_view line, RawRow& row, int64_t prompt_tokens) {
    if (!c.eat('[')) bad("hash_ids: expected a list of integers", line);
    row.hash_block_tokens = kMooncakeBlockTokens;
    // The vector was moved into the previous request: one allocation here instead of a chain of
    // regrowths (Mooncake has one id per 512 prompt tokens, 24 on average). Never more than the
    // line could hold (an id and its comma take two characters at least): input_length is the
    // file's word, however large.
    const size_t expected =
        prompt_tokens > 0 ? static_cast<size_t>((prompt_tokens + 511) / 512) : 64;
    row.prefix_hashes.reserve(std::min(expected, c.rest().size() / 2 + 1));
    if (c.eat(']')) return;
    if (!c.uint_list(row.prefix_hashes)) {
      bad("hash_ids: expected integers >= 0", c.rest().empty() ? line : c.rest());
    }
    if (!c.eat(']')) bad("hash_ids: expected a list of integers", line);
  }

  std::unique_ptr<LineReader> lines_;
  std::string pending_;
  bool has_pending_;
  std::string time_name_ = "timestamp";
};

}  // namespace

std::unique_ptr<RowParser> make_mooncake_parser(std::unique_ptr<LineReader> lines,
                                                std::string first_line) {
  return std::make_unique<MooncakeRowParser>(std::move(lines), std::move(first_line));
}

}  // namespace kvsim
