#include "core/atomic_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/errors.h"

namespace kvsim {

namespace fs = std::filesystem;

namespace {
// ".tmp." and a pid of at most 10 digits.
constexpr size_t kTemporarySuffixBytes = 15;
// Large enough that a million-row file costs a few hundred write calls.
constexpr size_t kFlushBytes = size_t{1} << 20;

// Removes, in `dir`, every "<name>.tmp.<pid>" whose pid is no longer a process, for the one
// <name> given, or for any when `name` is empty: what a run killed while writing left (SIGKILL
// skips every destructor). A live pid's file may be another process writing the same name; it
// stays.
void remove_dead_temporaries(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    const size_t tmp = file.rfind(".tmp.");
    if (tmp == std::string::npos || tmp == 0) continue;
    if (!name.empty() && file.compare(0, tmp, name) != 0) continue;
    const std::string digits = file.substr(tmp + 5);
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const auto pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || pid <= 0) continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) {
      std::error_code rm;
      fs::remove(it->path(), rm);
    }
  }
}

void remove_stale_temporaries(const fs::path& path) {
  remove_dead_temporaries(path.has_parent_path() ? path.parent_path() : fs::path("."),
                          path.filename().string());
}

// The open temporaries, for remove_open_temporaries() in a signal handler: fixed storage (no
// allocation there) and a state per slot (0 free, 1 being filled and its file opened, 2 in use)
// that the handler reads without a lock. A sweep holds a few files per running point, far below
// the slot count.
constexpr int kSlots = 256;
struct OpenSlot {
  std::atomic<int> state{0};
  char tmp[kMaxOutputPathBytes];
  char dir[kMaxOutputPathBytes];  // the folder the file made ("" if none)
};
OpenSlot g_open[kSlots];
// Set by remove_open_temporaries(): from then on no thread creates a temporary. With the slot
// states this is the handshake that keeps a worker thread from opening a file after the handler
// has looked at its slot (the handler runs on one thread while the others keep going).
std::atomic<bool> g_stopping{false};

// Blocks the stop signals on this thread while it lives: the handler waits for slots in state 1,
// so it must never run on the thread that holds one.
class StopSignalsBlocked {
 public:
  StopSignalsBlocked() {
    sigset_t set;
    ::sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGXFSZ}) ::sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~StopSignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  StopSignalsBlocked(const StopSignalsBlocked&) = delete;
  StopSignalsBlocked& operator=(const StopSignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

// Takes a free slot (state 1) for `tmp`; -1 when all are taken (the file then goes unregistered,
// left to the next run's removal of stale temporaries). The caller opens the file and calls
// publish_slot, stop signals blocked throughout.
int claim_slot(const fs::path& tmp, const fs::path& dir) {
  const std::string& t = tmp.native();
  const std::string& d = dir.native();
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!g_open[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_open[i].tmp, t.c_str(), t.size() + 1);
    std::memcpy(g_open[i].dir, d.c_str(), d.size() + 1);
    return i;
  }
  return -1;
}

void publish_slot(int slot) {
  if (slot >= 0) g_open[slot].state.store(2);
}

void release_slot(int& slot) {
  if (slot >= 0) g_open[slot].state.store(0);
  slot = -1;
}

// A stop handler is removing the temporaries and is about to end the process: this thread
// creates nothing more. It removes the folder it made, if empty, and waits for the exit (its stop
// signals are blocked, so the pause lasts until the handler's _exit).
[[noreturn]] void wait_for_stop(const fs::path& created_dir) {
  if (!created_dir.empty()) ::rmdir(created_dir.c_str());
  for (;;) ::pause();
}

}  // namespace

void remove_open_temporaries() noexcept {
  g_stopping.store(true);
  // A slot in state 1 is a file being opened on another thread: wait until it is open (state 2),
  // or given up (state 0) because that thread saw g_stopping, then unlink it.
  for (OpenSlot& s : g_open) {
    int state = s.state.load();
    while (state == 1) state = s.state.load();
    if (state == 2) ::unlink(s.tmp);
  }
  for (OpenSlot& s : g_open) {
    if (s.state.load() == 2 && s.dir[0] != '\0') ::rmdir(s.dir);
  }
}

void remove_stale_temporaries_in(const fs::path& dir) { remove_dead_temporaries(dir, ""); }

void check_output_path(const fs::path& path) {
  const size_t longest = path.native().size() + kTemporarySuffixBytes;
  if (longest >= kMaxOutputPathBytes) {
    throw InputError(
        fmt::format("{}...: output path too long ({} bytes with its temporary suffix; at most {})",
                    path.native().substr(0, 60), longest, kMaxOutputPathBytes - 1));
  }
}

void check_output_folder(const fs::path& dir) {
  const size_t bytes = dir.native().size();
  if (bytes > kMaxOutputFolderBytes) {
    throw InputError(fmt::format(
        "{}...: output folder path too long ({} bytes; at most {}, leaving room for the files "
        "under it)",
        dir.native().substr(0, 60), bytes, kMaxOutputFolderBytes));
  }
}

AtomicFile::AtomicFile(fs::path path) : path_(std::move(path)) {
  check_output_path(path_);  // before anything is made: a signal handler must be able to find it
  std::error_code ec;
  if (path_.has_parent_path() && !fs::exists(path_.parent_path(), ec)) {
    fs::create_directories(path_.parent_path(), ec);
    if (ec) {
      throw InputError(fmt::format("{}: cannot create output folder: {}",
                                   path_.parent_path().string(), ec.message()));
    }
    created_dir_ = path_.parent_path();
  }
  remove_stale_temporaries(path_);
  tmp_ = path_;
  tmp_ += fmt::format(".tmp.{}", ::getpid());
  open_registered();
}

void AtomicFile::open_registered() {
  const StopSignalsBlocked blocked;
  slot_ = claim_slot(tmp_, created_dir_);
  // Sequentially consistent with the handler's store of g_stopping and its reads of the slots:
  // either this thread sees the stop, or the handler sees this slot in state 1 and waits for it.
  if (g_stopping.load()) {
    release_slot(slot_);
    wait_for_stop(created_dir_);
  }
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = errno;
  if (fd_ < 0) {
    release_slot(slot_);
    throw InputError(
        fmt::format("{}: cannot write output: {}", path_.string(), std::strerror(err)));
  }
  publish_slot(slot_);
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(tmp_.c_str());
  release_slot(slot_);  // after the unlink: a signal in between only unlinks it again
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
  if (g_stopping.load()) wait_for_stop({});  // as in commit(): the process is ending
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  release_slot(slot_);
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
    // The stop handler unlinked the temporary: no error to report, the process is ending.
    if (g_stopping.load()) wait_for_stop({});
    ::unlink(tmp_.c_str());
    release_slot(slot_);
    throw InputError(
        fmt::format("{}: cannot rename output into place: {}", path_.string(), std::strerror(err)));
  }
  release_slot(slot_);  // after the rename: a signal in between finds no temporary to unlink
  committed_ = true;
}

void write_file_atomic(const fs::path& path, std::string_view content) {
  AtomicFile file(path);
  file.append(content);
  file.commit();
}

}  // namespace kvsim
