// Crash-safe output: content goes to "<name>.tmp.<pid>" and is renamed over the final name only
// when complete, so a killed run never leaves a half-written file under a final name. Whole
// files go through write_file_atomic; files written while the run produces them (requests.csv can
// hold a million rows) through AtomicFile, without holding them in memory.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace kvsim {

class AtomicFile {
 public:
  // Creates missing parent folders and opens the temporary file. Removes the temporaries of
  // `path` that runs killed while writing it left ("<name>.tmp.<pid>" of a pid no longer
  // running), so a re-run or a resume leaves nothing behind. Throws InputError naming the path
  // when the folder is not writable.
  explicit AtomicFile(std::filesystem::path path);
  // Without commit(): removes the temporary file, and the parent folder if this object created it
  // and it is left empty (a failed run leaves nothing behind).
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends `text` (buffered; written out in large pieces). Requires: not committed.
  void append(std::string_view text);
  // Writes the rest, fsyncs and renames the file into place. Throws InputError.
  void commit();

 private:
  void write_all(std::string_view text);
  void fail(const char* what, int err);

  std::filesystem::path path_;
  std::filesystem::path tmp_;
  std::filesystem::path created_dir_;  // empty unless the constructor made the folder
  int fd_ = -1;
  bool committed_ = false;
  std::string buffer_;
};

// Writes `content` to `path` atomically (write temp, flush, fsync, rename). Creates parent
// folders. Throws InputError naming the path if the folder is not writable.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

}  // namespace kvsim
