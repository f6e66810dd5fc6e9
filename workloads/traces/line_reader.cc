#include "workloads/traces/line_reader.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/errors.h"

namespace kvsim {

namespace {
constexpr size_t kChunkBytes = size_t{1} << 20;
}  // namespace

LineReader::LineReader(const std::string& path) : path_(path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError(fmt::format("{}: is a directory, expected a trace file", path));
  }
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr) {
    throw InputError(fmt::format("{}: cannot open trace file: {}", path, std::strerror(errno)));
  }
  buf_.resize(kChunkBytes);
}

LineReader::~LineReader() {
  if (file_ != nullptr) std::fclose(file_);
}

bool LineReader::fill() {
  if (eof_) return false;
  // Keep the unread tail (a partial line) at the front, then top the buffer up behind it.
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buf_.size()) {
    if (buf_.size() >= kMaxLineBytes) {
      throw InputError(fmt::format("{}:{}: line longer than {} MiB, not a trace", path_, line_ + 1,
                                   kMaxLineBytes >> 20));
    }
    buf_.resize(buf_.size() * 2);
  }
  size_t got = std::fread(buf_.data() + end_, 1, buf_.size() - end_, file_);
  if (got == 0) {
    if (std::ferror(file_)) {
      throw InputError(fmt::format("{}: read error: {}", path_, std::strerror(errno)));
    }
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

bool LineReader::next(std::string_view& line) {
  size_t scanned = begin_;  // bytes before this offset hold no newline
  const char* nl = nullptr;
  while (true) {
    nl = static_cast<const char*>(std::memchr(buf_.data() + scanned, '\n', end_ - scanned));
    if (nl != nullptr) break;
    size_t kept = end_ - begin_;
    if (!fill()) break;
    scanned = kept;  // fill() moved the tail to the front
  }
  if (nl == nullptr && begin_ == end_) return false;
  const char* start = buf_.data() + begin_;
  size_t len = nl != nullptr ? static_cast<size_t>(nl - start) : end_ - begin_;
  had_newline_ = nl != nullptr;
  begin_ += len + (nl != nullptr ? 1 : 0);
  ++line_;
  if (std::memchr(start, '\0', len) != nullptr) {
    throw InputError(
        fmt::format("{}:{}: binary data (a NUL byte), expected a text trace", path_, line_));
  }
  if (len > 0 && start[len - 1] == '\r') --len;
  if (line_ == 1 && len >= 3 && std::memcmp(start, "\xEF\xBB\xBF", 3) == 0) {
    start += 3;
    len -= 3;
  }
  line = std::string_view(start, len);
  return true;
}

}  // namespace kvsim
