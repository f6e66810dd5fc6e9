// LineReader: reads a text file line by line through one reusable buffer, so a trace of any size
// streams in constant memory. No iostreams: a chunked fread plus memchr for the newline.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace kvsim {

class LineReader {
 public:
  // Opens `path`. Throws InputError when it cannot be opened or is a directory.
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its "\n" (nor a "\r" before it, nor a UTF-8 byte-order mark on line
  // 1); false at the end of the file. The view stays valid until the next call. Throws
  // InputError on read errors, on a NUL byte (binary file) and on lines over kMaxLineBytes.
  bool next(std::string_view& line);
  // 1-based number of the line last returned by next().
  int64_t line_number() const { return line_; }
  // False when the line last returned was the file's last and had no newline after it.
  bool had_newline() const { return had_newline_; }
  const std::string& path() const { return path_; }

  static constexpr size_t kMaxLineBytes = size_t{64} << 20;

 private:
  bool fill();  // reads more bytes after the kept tail; false at end of file

  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<char> buf_;
  size_t begin_ = 0;  // first unread byte
  size_t end_ = 0;    // one past the last valid byte
  bool eof_ = false;
  bool had_newline_ = true;
  int64_t line_ = 0;
};

}  // namespace kvsim
