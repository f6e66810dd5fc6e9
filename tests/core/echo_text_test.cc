// echo_text: what error messages quote from the input is short, one line and valid UTF-8.
#include <catch2/catch.hpp>

#include <string>

#include "core/echo_text.h"

using kvsim::echo_text;

TEST_CASE("echo_text keeps short text and cuts long text at a character", "[core][echo]") {
  CHECK(echo_text("llama-3-8b") == "llama-3-8b");
  CHECK(echo_text("") == "");
  // 40 characters kept, then the mark: the 10 MB value of a bad scenario stays 43 bytes.
  const std::string big(10'000'000, 'a');
  CHECK(echo_text(big) == std::string(40, 'a') + "...");
  CHECK(echo_text("abcdef", 3) == "abc...");
  CHECK(echo_text("abc", 3) == "abc");  // exactly max_chars: no mark
  // A multi-byte character counts once and is never split: "é" is 2 bytes, "€" 3, "𝄞" 4.
  CHECK(echo_text("\xC3\xA9\xE2\x82\xAC\xF0\x9D\x84\x9Ez", 3) ==
        "\xC3\xA9\xE2\x82\xAC\xF0\x9D\x84\x9E...");
}

TEST_CASE("echo_text escapes quotes, control characters and bytes that are not UTF-8",
          "[core][echo]") {
  CHECK(echo_text("a\"b\\c") == "a\\\"b\\\\c");
  CHECK(echo_text("line1\nline2\t\r") == "line1\\nline2\\t\\r");
  CHECK(echo_text(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(echo_text("\x7F") == "\\x7F");
  // A lone continuation byte, a truncated sequence, an overlong "/" (C0 AF), a surrogate
  // (ED A0 80) and a byte that never occurs in UTF-8 (FF): each invalid byte is one \xNN.
  CHECK(echo_text("\x80") == "\\x80");
  CHECK(echo_text("\xE2\x82") == "\\xE2\\x82");
  CHECK(echo_text("\xC0\xAF") == "\\xC0\\xAF");
  CHECK(echo_text("\xED\xA0\x80") == "\\xED\\xA0\\x80");
  CHECK(echo_text("x\xFFy") == "x\\xFFy");
  // An escaped byte counts as one character towards the cut.
  CHECK(echo_text("\xFF\xFF\xFF", 2) == "\\xFF\\xFF...");
}
