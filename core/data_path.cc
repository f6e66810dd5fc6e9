#include "core/data_path.h"

#include <unistd.h>

#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "core/errors.h"

namespace kvsim {
namespace fs = std::filesystem;

namespace {

fs::path executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

bool holds_catalogs(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "models" / "catalog" / "models.yaml", ec);
}

}  // namespace

fs::path data_dir() {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("KVSIM_DATA_DIR"); env && *env) candidates.emplace_back(env);
  if (fs::path exe = executable_dir(); !exe.empty()) {
    candidates.push_back(exe.parent_path() / "share" / "kvsim");
  }
  candidates.emplace_back(KVSIM_INSTALL_DATA_DIR);
  candidates.emplace_back(KVSIM_SOURCE_DATA_DIR);
  for (const auto& c : candidates) {
    if (holds_catalogs(c)) return c;
  }
  std::string tried;
  for (const auto& c : candidates) tried += (tried.empty() ? "" : ", ") + c.string();
  throw InputError(
      fmt::format("cannot find kvsim's data files (models/catalog/models.yaml); looked in: {}; set "
                  "KVSIM_DATA_DIR to the folder that holds them",
                  tried));
}

fs::path data_file(const std::string& relative) {
  fs::path p = data_dir() / relative;
  std::error_code ec;
  if (!fs::exists(p, ec)) throw InputError(fmt::format("{}: missing kvsim data file", p.string()));
  return p;
}

const char* kvsim_version() { return KVSIM_VERSION; }

}  // namespace kvsim
