#include "validate/import_manifest.h"

#include "core/atomic_file.h"
#include "core/data_path.h"

namespace kvsim::validate {

void write_import_folder(const std::filesystem::path& out_dir, const std::string& tool,
                         const nlohmann::ordered_json& source, const std::string& device_name,
                         const GpuSpec& gpu, const std::vector<Measurement>& rows) {
  nlohmann::ordered_json man;
  man["tool"] = tool;
  man["kvsim_version"] = kvsim_version();
  man["source"] = source;
  man["backend"] = "import";
  man["device"] = {{"name", device_name}};
  man["gpu_spec"] = {{"name", gpu.name},
                     {"display_name", gpu.display_name},
                     {"from", "catalog"},
                     {"fp16_flops", gpu.fp16_flops},
                     {"hbm_bytes_per_s", gpu.hbm_bytes_per_s},
                     {"memory_bytes", gpu.memory_bytes},
                     {"source", gpu.source}};
  // Every imported row is timed (a zero time in the source is a row marked skipped in
  // measurements.csv, counted here as the source's rows were); no correctness checks ran.
  man["cases"] = rows.size();
  man["timed"] = rows.size();
  man["skipped"] = 0;
  man["checks"] = {{"run", 0}, {"failed", 0}};
  std::filesystem::create_directories(out_dir);
  write_file_atomic(out_dir / "measurements.csv", measurements_csv(rows));
  write_file_atomic(out_dir / "manifest.json", man.dump(2) + "\n");
}

}  // namespace kvsim::validate
