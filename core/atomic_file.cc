#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/errors.h"

namespace kvsim {

namespace fs = std::filesystem;

namespace {
// Large enough that a million-row file costs a few hundred write calls.
constexpr size_t kFlushBytes = size_t{1} << 20;
}  // namespace

AtomicFile::AtomicFile(fs::path path) : path_(std::move(path)) {
  std::error_code ec;
  if (path_.has_parent_path() && !fs::exists(path_.parent_path(), ec)) {
    fs::create_directories(path_.parent_path(), ec);
    if (ec) {
      throw InputError(fmt::format("{}: cannot create output folder: {}",
                                   path_.parent_path().string(), ec.message()));
    }
    created_dir_ = path_.parent_path();
  }
  tmp_ = path_;
  tmp_ += fmt::format(".tmp.{}", ::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw InputError(
        fmt::format("{}: cannot write output: {}", path_.string(), std::strerror(errno)));
  }
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(tmp_.c_str());
  std::error_code ec;
  if (!created_dir_.empty() && fs::is_empty(created_dir_, ec)) fs::remove(created_dir_, ec);
}

void AtomicFile::append(std::string_view text) {
  buffer_.append(text);
  if (buffer_.size() >= kFlushBytes) {
    write_all(buffer_);
    buffer_.clear();
  }
}

void AtomicFile::fail(const char* what, int err) {
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  throw InputError(fmt::format("{}: {}: {}", path_.string(), what, std::strerror(err)));
}

void AtomicFile::write_all(std::string_view text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write failed", errno);
    done += static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  write_all(buffer_);
  buffer_.clear();
  ::fsync(fd_);
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw InputError(fmt::format("{}: cannot rename output into place: {}", path_.string(),
                                 std::strerror(err)));
  }
  committed_ = true;
}

void write_file_atomic(const fs::path& path, std::string_view content) {
  AtomicFile file(path);
  file.append(content);
  file.commit();
}

}  // namespace kvsim
