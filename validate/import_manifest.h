// The measure folder an importer writes (`kvsim-validate import vidur`, `import llmservingsim`):
// measurements.csv and a manifest.json in the layout `kvsim-validate measure` writes, so
// calibrate and compare read imported data like kvsim's own runs. The importers differ only in
// the `source` block (which file, which format, how the split was made).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/gpu_spec.h"
#include "validate/measurements.h"

namespace kvsim::validate {

// Creates `out_dir` and writes out_dir/measurements.csv and out_dir/manifest.json: `tool` (the
// command), `source` (the importer's own description), the device by `device_name`, the catalog
// GPU whose peaks the rows are relative to, and the row counts.
void write_import_folder(const std::filesystem::path& out_dir, const std::string& tool,
                         const nlohmann::ordered_json& source, const std::string& device_name,
                         const GpuSpec& gpu, const std::vector<Measurement>& rows);

}  // namespace kvsim::validate
