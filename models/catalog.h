// The shipped model and GPU catalogs (models/catalog/*.yaml), loaded at run time, and the
// resolution of a scenario's `model:`/`gpu:` value (a catalog name or an inline spec).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "models/gpu_spec.h"
#include "models/model_spec.h"

namespace kvsim {

class ConfigNode;

class Catalog {
 public:
  // Loads both YAML files from `dir` (a folder holding models.yaml and gpus.yaml).
  static Catalog load(const std::filesystem::path& dir);
  // The catalog shipped with kvsim (found through data_dir()); loaded once.
  static const Catalog& builtin();

  // Throws InputError "unknown model 'x'; did you mean 'y'? (known: ...)".
  const ModelSpec& model(const std::string& name) const;
  const GpuSpec& gpu(const std::string& name) const;
  const std::map<std::string, ModelSpec>& models() const { return models_; }
  const std::map<std::string, GpuSpec>& gpus() const { return gpus_; }

 private:
  std::map<std::string, ModelSpec> models_;
  std::map<std::string, GpuSpec> gpus_;
};

// `model:` in a scenario: a catalog name (string) or an inline spec (map, with `name`).
ModelSpec resolve_model(const ConfigNode& node, const Catalog& catalog);
// `gpu:` in a scenario: a catalog name or an inline spec.
GpuSpec resolve_gpu(const ConfigNode& node, const Catalog& catalog);

}  // namespace kvsim
