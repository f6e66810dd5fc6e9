// Token-length distributions for prompts and outputs, configured from YAML:
//   {type: fixed, value: 256}
//   {type: uniform, min: 100, max: 2000}                       (inclusive integers)
//   {type: lognormal, median: 1000, sigma: 1.0, min: 1, max: 32768}   (or mean: instead of median)
//   {type: mixture, components: [{weight: 0.9, type: fixed, value: 512},
//                                {weight: 0.1, type: fixed, value: 32768}]}
// Every sample is an integer >= 1; lognormal values are rounded to the nearest integer and then
// clipped to [min, max].
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/registry.h"
#include "workloads/random.h"

namespace kvsim {

class ConfigNode;

class LengthDist {
 public:
  enum class Type { kFixed, kUniform, kLognormal, kMixture };

  static LengthDist fixed(int64_t value);
  static LengthDist uniform(int64_t min, int64_t max);
  // mu = ln(median); sigma >= 0.
  static LengthDist lognormal(double mu, double sigma, int64_t min, int64_t max);
  // Requires: weights > 0, one per component.
  static LengthDist mixture(std::vector<double> weights, std::vector<LengthDist> components);
  // Reads a distribution node (see the header comment). Throws ConfigError with file:line:col.
  static LengthDist parse(const ConfigNode& node);

  int64_t sample(Rng& rng) const;
  // Largest value a sample can take (for sizing checks by callers).
  int64_t max_value() const;
  Type type() const { return type_; }

 private:
  Type type_ = Type::kFixed;
  int64_t lo_ = 1;  // fixed value, or min
  int64_t hi_ = 1;  // max
  double mu_ = 0.0;
  double sigma_ = 0.0;
  std::vector<double> cumulative_;  // mixture: normalised cumulative weights
  std::vector<LengthDist> components_;
};

// The length distribution registry: a distribution node's `type:` names one of its entries.
// `depth` counts the mixtures around the node (nesting is bounded). Adding a distribution takes
// one add() in register_length_dists() (lengths.cc).
struct LengthDistFactory {
  std::string example;  // a small valid node, e.g. "{type: fixed, value: 7}" (docs, contract tests)
  std::function<LengthDist(const ConfigNode& node, int depth)> parse;
};
using LengthDistRegistry = Registry<LengthDistFactory>;
void register_length_dists(LengthDistRegistry& registry);  // fixed, uniform, lognormal, mixture
const LengthDistRegistry& length_dist_registry();

// "a|b|c": a registry's names, as the schema hints in messages show them.
template <class F>
std::string registry_choices(const Registry<F>& registry) {
  std::string out;
  for (const auto& name : registry.names()) out += (out.empty() ? "" : "|") + name;
  return out;
}

}  // namespace kvsim
