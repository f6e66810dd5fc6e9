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
  // Registers the temporary for remove_open_temporaries() and creates it, as one step a stop
  // signal cannot split. Throws InputError.
  void open_registered();
  void write_all(std::string_view text);
  void fail(const char* what, int err);

  std::filesystem::path path_;
  std::filesystem::path tmp_;
  std::filesystem::path created_dir_;  // empty unless the constructor made the folder
  int slot_ = -1;                      // in the table remove_open_temporaries() reads
  int fd_ = -1;
  bool committed_ = false;
  std::string buffer_;
};

// The longest output path, its temporary suffix included, plus one: what the table of open
// temporaries holds per file (a signal handler cannot allocate).
constexpr size_t kMaxOutputPathBytes = 1024;
// The longest `-o` folder: room under it for a file name of up to 255 bytes and its suffix.
constexpr size_t kMaxOutputFolderBytes = kMaxOutputPathBytes - 256 - 16;

// Throws InputError naming (the start of) `path` when its temporary would be kMaxOutputPathBytes
// or longer. AtomicFile checks every file; a command checks its -o folder with
// check_output_folder before it writes anything.
void check_output_path(const std::filesystem::path& path);
void check_output_folder(const std::filesystem::path& dir);

// Removes the temporary file of every AtomicFile not yet committed or destroyed, and the folders
// they made when left empty; from then on no AtomicFile creates a temporary (a thread about to
// waits for the process to end). Async-signal-safe (unlink, rmdir and atomics only): what a
// SIGINT, SIGTERM or SIGXFSZ handler calls before _exit, which skips every destructor
// (core/stop_signals.h). It waits for a file another thread is opening, so the handler
// must not run on a thread that is opening one: AtomicFile blocks those signals while it does.
// A temporary beyond the table's slots is left to the next run's removal of stale temporaries.
void remove_open_temporaries() noexcept;

// Removes every "<name>.tmp.<pid>" in `dir` (not below it) whose process is gone: for a folder
// kvsim owns (a result folder), where a run killed by SIGKILL may have left temporaries of files
// the next run writes late or never. An AtomicFile removes its own name's as it opens.
void remove_stale_temporaries_in(const std::filesystem::path& dir);

// Writes `content` to `path` atomically (write temp, flush, fsync, rename). Creates parent
// folders. Throws InputError naming the path if the folder is not writable.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

}  // namespace kvsim
