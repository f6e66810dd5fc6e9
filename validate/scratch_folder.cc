#include "validate/scratch_folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <system_error>

namespace kvsim::validate {

namespace {

// A fixed table the signal handler reads without locks: a slot's path is complete before the
// slot is marked in use, and a path too long for it is left to the next run's clean-up.
constexpr size_t kSlots = 8;
constexpr size_t kPathBytes = 4096;
struct Slot {
  std::atomic<bool> claimed{false};  // owned by a ScratchFolder
  std::atomic<bool> used{false};     // path written: the handler may read it
  char path[kPathBytes];
};
std::array<Slot, kSlots> g_slots;

// The entries of `dir` (not . or ..) unlinked, then `dir` itself; async-signal-safe.
void remove_flat_folder(const char* dir) noexcept {
  const int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    alignas(8) char buf[4096];
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long at = 0; at < n;) {
        const auto* d = reinterpret_cast<const struct dirent64*>(buf + at);
        at += d->d_reclen;
        if (std::strcmp(d->d_name, ".") == 0 || std::strcmp(d->d_name, "..") == 0) continue;
        ::unlinkat(fd, d->d_name, 0);
      }
    }
    ::close(fd);
  }
  ::rmdir(dir);
}

}  // namespace

ScratchFolder::ScratchFolder(std::filesystem::path path) : path_(std::move(path)) {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  const std::string p = path_.string();
  if (p.size() >= kPathBytes) return;
  for (size_t i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_slots[i].claimed.compare_exchange_strong(expected, true)) continue;
    std::memcpy(g_slots[i].path, p.c_str(), p.size() + 1);
    g_slots[i].used.store(true);
    slot_ = static_cast<int>(i);
    return;
  }
}

ScratchFolder::~ScratchFolder() {
  if (slot_ >= 0) {
    g_slots[static_cast<size_t>(slot_)].used.store(false);
    g_slots[static_cast<size_t>(slot_)].claimed.store(false);
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void remove_scratch_folders() noexcept {
  for (Slot& s : g_slots) {
    if (s.used.load()) remove_flat_folder(s.path);
  }
}

}  // namespace kvsim::validate
