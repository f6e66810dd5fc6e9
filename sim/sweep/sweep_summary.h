// A sweep's summary.csv: one row per point and policy, a column per swept key, then the policy's
// summary columns, in point order. Built from the point folders and sweep.json, streamed, so a
// million-point sweep never holds the file or its index in memory.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kvsim {

// summary.csv text of a sweep whose points are spread over `dirs` (each written by run_sweep for
// the same plan). Throws InputError naming the first missing point or a folder from another sweep.
std::string sweep_summary_csv(const std::vector<std::filesystem::path>& dirs);
// The same, streamed to `path` (atomically: complete or absent) without holding the file or the
// sweep's index in memory.
void write_sweep_summary_csv(const std::vector<std::filesystem::path>& dirs,
                             const std::filesystem::path& path);

}  // namespace kvsim
