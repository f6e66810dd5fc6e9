// The constructors make_guards() dispatches to, one per guard type (each in its own file).
#pragma once

#include <memory>

#include "sim/guards/guard.h"

namespace kvsim {

std::unique_ptr<Guard> make_kv_guard(const ConfigNode& c, const ModelSpec& model);
std::unique_ptr<Guard> make_reserve_guard(const ConfigNode& c, const ModelSpec& model);
std::unique_ptr<Guard> make_watermark_guard(const ConfigNode& c, const ModelSpec& model);
std::unique_ptr<Guard> make_max_model_len_guard(const ConfigNode& c, const ModelSpec& model);
std::unique_ptr<Guard> make_max_inflight_guard(const ConfigNode& c, const ModelSpec& model);

// Reads an optional `timeout_s` into a SimTime (-1 = wait forever).
SimTime read_timeout(const ConfigNode& c);

}  // namespace kvsim
