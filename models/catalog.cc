#include "models/catalog.h"

#include <fmt/format.h>

#include "core/config_node.h"
#include "core/data_path.h"
#include "core/echo_text.h"
#include "core/errors.h"
#include "models/hf_config.h"

namespace kvsim {

namespace {

template <class Spec, class Parse>
std::map<std::string, Spec> load_entries(const std::filesystem::path& file, Parse parse) {
  ConfigNode root = ConfigNode::parse_file(file);
  if (!root.is_map()) root.fail_expected("a map of catalog entries");
  std::map<std::string, Spec> out;
  for (const std::string& key : root.keys()) out.emplace(key, parse(root.child(key), key));
  root.reject_unknown_keys();
  return out;
}

template <class Spec>
const Spec& lookup(const std::map<std::string, Spec>& entries, const std::string& name,
                   const char* what) {
  if (auto it = entries.find(name); it != entries.end()) return it->second;
  std::vector<std::string> names;
  std::string list;
  for (const auto& [k, v] : entries) {
    names.push_back(k);
    list += (list.empty() ? "" : ", ") + k;
  }
  std::string hint;
  if (auto near = nearest_name(name, names)) hint = fmt::format("; did you mean '{}'?", *near);
  throw InputError(fmt::format("unknown {} '{}'{} (known: {})", what, echo_text(name), hint, list));
}

}  // namespace

Catalog Catalog::load(const std::filesystem::path& dir) {
  Catalog c;
  c.models_ = load_entries<ModelSpec>(dir / "models.yaml", parse_model_spec);
  c.gpus_ = load_entries<GpuSpec>(dir / "gpus.yaml", parse_gpu_spec);
  return c;
}

const Catalog& Catalog::builtin() {
  static const Catalog catalog = load(data_dir() / "models" / "catalog");
  return catalog;
}

const ModelSpec& Catalog::model(const std::string& name) const {
  return lookup(models_, name, "model");
}

const GpuSpec& Catalog::gpu(const std::string& name) const { return lookup(gpus_, name, "GPU"); }

ModelSpec load_model(const std::string& name_or_file, const Catalog& catalog,
                     const std::filesystem::path& base_dir) {
  if (catalog.models().count(name_or_file) != 0) return catalog.model(name_or_file);
  std::filesystem::path file(name_or_file);
  const std::string ext = file.extension().string();
  if (file.is_relative() && !base_dir.empty()) file = base_dir / file;
  const bool hf = ext == ".json", spec = ext == ".yaml" || ext == ".yml";
  // A name that is neither in the catalog nor a model file's name, but names something on disk
  // (a model's folder, /dev/zero): say what it is rather than "unknown model".
  std::error_code ec;
  if (!hf && !spec && !std::filesystem::exists(std::filesystem::symlink_status(file, ec))) {
    return catalog.model(name_or_file);
  }
  const std::string what = hf     ? "a Hugging Face config.json"
                           : spec ? "a kvsim model spec (YAML)"
                                  : "a catalog name, a config.json or a kvsim model YAML";
  if (const std::string why = model_file_problem(file, what); !why.empty()) {
    throw InputError(fmt::format("{}: {}", echo_text(file.string(), 200), why));
  }
  if (!hf && !spec) {
    throw InputError(fmt::format("{}: not a model file: expected {}", echo_text(file.string(), 200),
                                 "a catalog name, a .json (Hugging Face config.json) or a .yaml "
                                 "(kvsim model spec)"));
  }
  if (hf) {
    ModelSpec m = read_hf_config(file);
    m.name = name_or_file;  // as the user wrote it: outputs do not depend on the working folder
    return m;
  }
  const ConfigNode root = ConfigNode::parse_file(file);
  if (!root.is_map()) root.fail_expected("a kvsim model spec (a map)");
  ModelSpec m = parse_model_spec(root, root.get<std::string>("name", file.stem().string()));
  root.reject_unknown_keys();
  return m;
}

ModelSpec resolve_model(const ConfigNode& node, const Catalog& catalog) {
  if (node.is_scalar()) {
    try {
      return load_model(node.as<std::string>(), catalog,
                        std::filesystem::path(node.source()).parent_path());
    } catch (const ConfigError&) {
      throw;
    } catch (const InputError& e) {
      node.fail(e.what());
    }
  }
  if (!node.is_map()) node.fail_expected("a catalog model name or an inline model spec");
  return parse_model_spec(node, node.get<std::string>("name", "inline-model"));
}

GpuSpec resolve_gpu(const ConfigNode& node, const Catalog& catalog) {
  if (node.is_scalar()) {
    try {
      return catalog.gpu(node.as<std::string>());
    } catch (const ConfigError&) {
      throw;
    } catch (const InputError& e) {
      node.fail(e.what());
    }
  }
  if (!node.is_map()) node.fail_expected("a catalog GPU name or an inline GPU spec");
  return parse_gpu_spec(node, node.get<std::string>("name", "inline-gpu"));
}

}  // namespace kvsim
