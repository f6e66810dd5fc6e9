// A folder of intermediate results that only a finished command keeps (vllm-run's
// step-overhead-fit/: one kvsim run per bisection step). While a ScratchFolder lives, a stop
// signal's handler removes the folder with remove_scratch_folders(); its destructor removes it
// otherwise, so neither an error nor a stopped run leaves a partial one behind.
#pragma once

#include <filesystem>

namespace kvsim::validate {

class ScratchFolder {
 public:
  // Removes what an earlier, stopped run left at `path`, and registers it.
  explicit ScratchFolder(std::filesystem::path path);
  ~ScratchFolder();  // removes the folder and what it holds
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int slot_ = -1;
};

// Removes every live ScratchFolder's files (one level: the folder holds files only) and the
// folder. Async-signal-safe: open, getdents64, unlinkat, rmdir and atomic loads only.
void remove_scratch_folders() noexcept;

}  // namespace kvsim::validate
