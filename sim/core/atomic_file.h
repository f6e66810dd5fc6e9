// Crash-safe output: content goes to "<name>.tmp.<pid>" and is renamed over the final name only
// when complete, so a killed run never leaves a half-written file under a final name.
#pragma once

#include <filesystem>
#include <string_view>

namespace kvsim {

// Writes `content` to `path` atomically (write temp, flush, fsync, rename). Creates parent
// folders. Throws InputError naming the path if the folder is not writable.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

}  // namespace kvsim
