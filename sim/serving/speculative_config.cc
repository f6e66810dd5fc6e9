#include "sim/serving/speculative_config.h"

#include <fmt/format.h>

#include "core/config_node.h"

namespace kvsim {

namespace {

// SplitMix64's finaliser (Steele, Lea, Flood 2014): a fixed, portable mix of 64 bits.
uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::optional<SpeculativeConfig> parse_speculative_config(const ConfigNode& engine) {
  const std::optional<ConfigNode> node = engine.optional_child("speculative_config");
  if (!node || node->is_null()) return std::nullopt;
  const ConfigNode& n = *node;
  if (!n.is_map()) n.fail_expected("a speculative_config section (a map)");
  SpeculativeConfig c;
  using Method = SpeculativeConfig::Method;
  c.method = n.get_enum<Method>("method", {{"eagle", Method::kEagle},
                                           {"eagle3", Method::kEagle3},
                                           {"mtp", Method::kMtp},
                                           {"ngram", Method::kNgram},
                                           {"ngram_gpu", Method::kNgramGpu},
                                           {"draft_model", Method::kDraftModel}});
  c.method_name = n.get<std::string>("method");
  // The draft model's name is read here; the scenario's setup resolves it (it needs the catalog)
  // as SpeculativeConfig::draft_model.
  const std::optional<ConfigNode> model = n.optional_child("model");
  if (c.method == Method::kDraftModel) {
    if (!model) {
      n.child("method").fail(
          "method draft_model needs `model:` (the draft model: a catalog name or a model file)");
    }
    c.draft_model_name = model->as<std::string>();
  } else if (model) {
    model->fail(
        fmt::format("`model:` names a separate draft model, read only with method "
                    "draft_model (the {} drafter is built from the target's shape)",
                    c.method_name));
  }
  c.num_speculative_tokens = n.get<int>("num_speculative_tokens", {.min = 1, .max = 64});
  const std::optional<ConfigNode> rate = n.optional_child("acceptance_rate");
  const std::optional<ConfigNode> per_pos = n.optional_child("acceptance_per_position");
  if (rate.has_value() == per_pos.has_value()) {
    (rate ? *rate : n)
        .fail(
            "give exactly one of acceptance_rate (each draft token accepted with this chance, "
            "given "
            "the one before was: position i then accepted with rate^i) or acceptance_per_position "
            "(a list of num_speculative_tokens rates, as vLLM's spec-decode metrics report them)");
  }
  const int k = c.num_speculative_tokens;
  if (rate) {
    const double a = rate->as<double>({.min = 0, .max = 1});
    double p = 1;
    for (int i = 0; i < k; ++i) c.acceptance_per_position.push_back(p *= a);
  } else {
    if (!per_pos->is_sequence() || static_cast<int>(per_pos->size()) != k) {
      per_pos->fail(
          fmt::format("expected a list of {} rates (one per draft position, "
                      "num_speculative_tokens {})",
                      k, k));
    }
    double before = 1;
    for (int i = 0; i < k; ++i) {
      const ConfigNode e = per_pos->at(static_cast<size_t>(i));
      const double p = e.as<double>({.min = 0, .max = 1});
      if (p > before) {
        e.fail(
            fmt::format("position {}'s rate {} is above position {}'s {}: a draft position is "
                        "accepted only when every one before it is, so the rates cannot grow",
                        i + 1, p, i, before));
      }
      c.acceptance_per_position.push_back(before = p);
    }
  }
  // vLLM's draft_tensor_parallel_size (default: the target's tensor parallelism); read here, held
  // to the target's by the engine's parse (another degree is not modelled).
  c.draft_tensor_parallel = n.get_optional<int>("draft_tensor_parallel_size");
  c.seed = static_cast<uint64_t>(n.get<int64_t>("seed", 0, {.min = 0, .max = 9.0e15}));
  return c;
}

int64_t accepted_drafts(const SpeculativeConfig& c, int64_t request_id, int64_t step,
                        int64_t drafts, std::optional<double> request_rate) {
  const uint64_t h =
      mix(mix(mix(c.seed) ^ static_cast<uint64_t>(request_id)) ^ static_cast<uint64_t>(step));
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  int64_t a = 0;
  if (request_rate) {
    double p = *request_rate;  // position a + 1's rate, multiplied as the parser multiplies
    while (a < drafts && u < p) {
      ++a;
      p *= *request_rate;
    }
    return a;
  }
  while (a < drafts && u < c.acceptance_per_position[static_cast<size_t>(a)]) ++a;
  return a;
}

}  // namespace kvsim
