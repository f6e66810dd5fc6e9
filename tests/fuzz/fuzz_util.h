// Shared by the libFuzzer targets: what counts as a clean rejection, and a scratch file for the
// parsers that read from a path.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace kvsim::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// One scratch file per fuzzing process (jobs run as separate processes), rewritten per input.
inline const std::string& scratch_path(const char* stem) {
  static const std::string path = (std::filesystem::temp_directory_path() /
                                   (std::string(stem) + "." + std::to_string(getpid())))
                                      .string();
  return path;
}

inline void write_scratch(const std::string& path, std::string_view text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();  // the harness itself is broken, not the parser
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
}

}  // namespace kvsim::fuzz
