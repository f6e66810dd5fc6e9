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

// A model named on the command line or in a scenario: a catalog name, or the path of a model file,
// relative to `base_dir` unless absolute: a kvsim model YAML (.yaml/.yml: the keys of a catalog
// entry, plus an optional `name`) or a Hugging Face config.json (.json: hf_config.h). Throws
// InputError (unknown name, unreadable or bad file, with the file's line:col).
ModelSpec load_model(const std::string& name_or_file, const Catalog& catalog,
                     const std::filesystem::path& base_dir = {});

// `model:` in a scenario: a catalog name or model file (string; files relative to the scenario's
// folder) or an inline spec (map, with `name`).
ModelSpec resolve_model(const ConfigNode& node, const Catalog& catalog);
// `gpu:` in a scenario: a catalog name or an inline spec.
GpuSpec resolve_gpu(const ConfigNode& node, const Catalog& catalog);

}  // namespace kvsim
