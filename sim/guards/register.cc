// make_guards: `type:` -> constructor. Registered explicitly (static-initializer registration
// silently vanishes when a static library drops an unreferenced object file).
#include <functional>
#include <map>

#include "core/config_node.h"
#include "sim/guards/guard_makers.h"

namespace kvsim {

SimTime read_timeout(const ConfigNode& c) {
  if (!c.has("timeout_s")) return -1;
  return seconds_to_sim(c.get<double>("timeout_s", {.min = 0, .max = 1e9}));
}

std::vector<std::unique_ptr<Guard>> make_guards(const ConfigNode& list, const ModelSpec& model) {
  using Make = std::function<std::unique_ptr<Guard>(const ConfigNode&, const ModelSpec&)>;
  static const std::map<std::string, Make> makers = {
      {"kv_guard", make_kv_guard},         {"reserve", make_reserve_guard},
      {"watermark", make_watermark_guard}, {"max_model_len", make_max_model_len_guard},
      {"max_inflight", make_max_inflight_guard},
  };
  std::vector<std::unique_ptr<Guard>> out;
  if (list.is_null()) return out;
  if (!list.is_sequence()) list.fail_expected("a list of guards");
  for (size_t i = 0; i < list.size(); ++i) {
    const ConfigNode g = list.at(i);
    const std::string type = g.get_enum(
        "type", {"none", "kv_guard", "reserve", "watermark", "max_model_len", "max_inflight"});
    if (type == "none") continue;
    out.push_back(makers.at(type)(g, model));
  }
  return out;
}

}  // namespace kvsim
