// Input echoed back in an error message. A message is one line a person reads, so what it quotes
// from the input is cut to a few dozen characters and escaped: a 10 MB value, a newline or bytes
// that are not UTF-8 never reach the terminal raw.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvsim {

// `text` cut to its first `max_chars` characters (UTF-8 code points), "..." marking the cut.
// Backslash and double quote are escaped, control characters and bytes that are not part of
// valid UTF-8 written as \n, \t, \r or \xNN; valid multi-byte characters are kept as they are.
// Callers add their own quotes.
std::string echo_text(std::string_view text, size_t max_chars = 40);

}  // namespace kvsim
