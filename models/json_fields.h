// The JSON form of each result type the commands print (`kvsim models/gpus/kv/latency/
// plausibility --json`) and the Python module returns: one to_json per type, its fields in one
// list, shared by a command's --json output, its --plot data and kvsim.kv() etc.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "models/gpu_spec.h"
#include "models/kv_calculator.h"
#include "models/latency/latency_model.h"
#include "models/latency/plausibility.h"
#include "models/model_spec.h"

namespace kvsim {

nlohmann::ordered_json to_json(const KvRow& r);
nlohmann::ordered_json to_json(const OpCost& o);
// The figures of one sequence length; with_ops adds the four per-operation breakdowns.
nlohmann::ordered_json to_json(const SequenceLatency& s, bool with_ops);
// kv_heads: the claim's own, or its model's when the claim leaves it out (0).
nlohmann::ordered_json to_json(const ClaimCheck& r, int kv_heads);
nlohmann::ordered_json to_json(const ModelSpec& m);
nlohmann::ordered_json to_json(const GpuSpec& g);

// The value, or null when absent.
template <class T>
nlohmann::ordered_json or_null(const std::optional<T>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

// The members `keys` of object j, in that order (a shorter form for a figure's data).
nlohmann::ordered_json pick(const nlohmann::ordered_json& j,
                            std::initializer_list<const char*> keys);

// An array of to_json(item, extra...) for every item.
template <class Items, class... Extra>
nlohmann::ordered_json to_json_array(const Items& items, const Extra&... extra) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& item : items) arr.push_back(to_json(item, extra...));
  return arr;
}

}  // namespace kvsim
