// Finds the data files kvsim ships (catalogs, scenarios, scripts) from the build tree and after
// `cmake --install`, so a binary works wherever it was built or installed.
#pragma once

#include <filesystem>
#include <string>

namespace kvsim {

// The folder that holds models/catalog/, scenarios/ and scripts/. Looks, in order, at
// $KVSIM_DATA_DIR, <exe>/../share/kvsim (installed), then the source tree the binary was built
// from. Throws InputError naming every place it looked when none holds the catalogs.
std::filesystem::path data_dir();

// data_dir() / relative, checked to exist.
std::filesystem::path data_file(const std::string& relative);

// kvsim's version string, e.g. "0.1.0".
const char* kvsim_version();

}  // namespace kvsim
