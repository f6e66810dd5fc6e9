// A result file written while the run produces it (requests.csv can hold a million rows): text
// goes through a buffer to "<name>.tmp.<pid>", and commit() renames it over the final name only
// once complete, so a killed or failed run never leaves a half-written file under a final name
// (the rule of sim/core/atomic_file.h, without holding the whole file in memory).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace kvsim {

class StreamedFile {
 public:
  // Creates missing parent folders and opens the temporary file. Throws InputError naming the
  // path when the folder is not writable.
  explicit StreamedFile(std::filesystem::path path);
  // Without commit(): removes the temporary file, and the parent folder if this object created it
  // and it is left empty (a failed run leaves nothing behind).
  ~StreamedFile();
  StreamedFile(const StreamedFile&) = delete;
  StreamedFile& operator=(const StreamedFile&) = delete;

  // Appends `text` (buffered; written out in large pieces). Requires: not committed.
  void append(std::string_view text);
  // Writes the rest, fsyncs and renames the file into place. Throws InputError.
  void commit();

 private:
  void flush();
  void fail(const char* what, int err);

  std::filesystem::path path_;
  std::filesystem::path tmp_;
  std::filesystem::path created_dir_;  // empty unless the constructor made the folder
  int fd_ = -1;
  bool committed_ = false;
  std::string buffer_;
};

}  // namespace kvsim
