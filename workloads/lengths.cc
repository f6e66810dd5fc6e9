#include "workloads/lengths.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/config_node.h"

namespace kvsim {

namespace {
// Token counts above this are surely typos (and would overflow byte arithmetic downstream).
constexpr double kMaxTokens = 1e9;
constexpr int kMaxMixtureDepth = 8;

LengthDist parse_at_depth(const ConfigNode& n, int depth);

LengthDist parse_mixture(const ConfigNode& n, int depth) {
  if (depth >= kMaxMixtureDepth) n.fail("mixtures nested too deep");
  ConfigNode list = n.child("components");
  if (!list.is_sequence() || list.size() == 0) list.fail_expected("a non-empty list of components");
  std::vector<double> weights;
  std::vector<LengthDist> parts;
  for (size_t i = 0; i < list.size(); ++i) {
    ConfigNode c = list.at(i);
    if (!c.is_map()) c.fail_expected("a component {weight, type, ...}");
    weights.push_back(c.get<double>("weight", {.min = 0, .max = 1e12, .min_exclusive = true}));
    parts.push_back(parse_at_depth(c, depth + 1));
  }
  return LengthDist::mixture(std::move(weights), std::move(parts));
}

LengthDist parse_at_depth(const ConfigNode& n, int depth) {
  if (n.is_scalar()) return LengthDist::fixed(n.as<int64_t>({.min = 1, .max = kMaxTokens}));
  const LengthDistRegistry& registry = length_dist_registry();
  if (!n.is_map()) {
    n.fail_expected("a length distribution {type: " + registry_choices(registry) + "}");
  }
  const auto& entry = registry.choose(n);
  n.allow(entry.keys);  // a typo's did-you-mean sees every key of the type
  return entry.make.parse(n, depth);
}

const Bounds kCount{.min = 1, .max = kMaxTokens};

LengthDist parse_fixed(const ConfigNode& n, int) {
  return LengthDist::fixed(n.get<int64_t>("value", kCount));
}

LengthDist parse_uniform(const ConfigNode& n, int) {
  const int64_t lo = n.get<int64_t>("min", kCount);
  const int64_t hi = n.get<int64_t>("max", {.min = static_cast<double>(lo), .max = kMaxTokens});
  return LengthDist::uniform(lo, hi);
}

LengthDist parse_lognormal(const ConfigNode& n, int) {
  const double sigma = n.get<double>("sigma", {.min = 0, .max = 10});
  if (n.has("median") == n.has("mean")) n.fail("lognormal: give exactly one of median or mean");
  const Bounds positive{.min = 0, .max = kMaxTokens, .min_exclusive = true};
  double mu = 0;
  if (auto median = n.get_optional<double>("median", positive)) {
    mu = std::log(*median);
  } else {
    // E[X] = exp(mu + sigma^2 / 2).
    mu = std::log(n.get<double>("mean", positive)) - 0.5 * sigma * sigma;
  }
  const int64_t lo = n.get<int64_t>("min", 1, kCount);
  const int64_t hi = n.get<int64_t>("max", static_cast<int64_t>(kMaxTokens),
                                    {.min = static_cast<double>(lo), .max = kMaxTokens});
  return LengthDist::lognormal(mu, sigma, lo, hi);
}

}  // namespace

LengthDist LengthDist::fixed(int64_t value) {
  KVSIM_CHECK(value >= 1, "fixed length {} < 1", value);
  LengthDist d;
  d.type_ = Type::kFixed;
  d.lo_ = d.hi_ = value;
  return d;
}

LengthDist LengthDist::uniform(int64_t min, int64_t max) {
  KVSIM_CHECK(min >= 1 && min <= max, "uniform [{}, {}]", min, max);
  LengthDist d;
  d.type_ = Type::kUniform;
  d.lo_ = min;
  d.hi_ = max;
  return d;
}

LengthDist LengthDist::lognormal(double mu, double sigma, int64_t min, int64_t max) {
  KVSIM_CHECK(min >= 1 && min <= max && sigma >= 0, "lognormal sigma {} [{}, {}]", sigma, min, max);
  LengthDist d;
  d.type_ = Type::kLognormal;
  d.mu_ = mu;
  d.sigma_ = sigma;
  d.lo_ = min;
  d.hi_ = max;
  return d;
}

LengthDist LengthDist::mixture(std::vector<double> weights, std::vector<LengthDist> components) {
  KVSIM_CHECK(!weights.empty() && weights.size() == components.size(), "mixture shape");
  LengthDist d;
  d.type_ = Type::kMixture;
  double total = 0;
  for (double w : weights) {
    KVSIM_CHECK(w > 0, "mixture weight {}", w);
    total += w;
  }
  double acc = 0;
  for (double w : weights) {
    acc += w;
    d.cumulative_.push_back(acc / total);
  }
  d.cumulative_.back() = 1.0;
  d.components_ = std::move(components);
  return d;
}

LengthDist LengthDist::parse(const ConfigNode& node) { return parse_at_depth(node, 0); }

void register_length_dists(LengthDistRegistry& r) {
  r.add({"fixed", "always the same length", {"value"}, {"{type: fixed, value: 7}", parse_fixed}});
  r.add({"uniform",
         "integer uniform in [min, max], unbiased",
         {"min", "max"},
         {"{type: uniform, min: 10, max: 20}", parse_uniform}});
  r.add({"lognormal",
         "exp(mu + sigma*Z) rounded, clipped to [min, max]",
         {"median", "mean", "sigma", "min", "max"},
         {"{type: lognormal, median: 100, sigma: 1, max: 4096}", parse_lognormal}});
  r.add({"mixture",
         "picks a component by weight, samples it",
         {"components"},
         {"{type: mixture, components: [{weight: 3, type: fixed, value: 5}, "
          "{weight: 1, type: uniform, min: 100, max: 200}]}",
          parse_mixture}});
}

const LengthDistRegistry& length_dist_registry() {
  static const LengthDistRegistry registry =
      LengthDistRegistry::filled("length distribution", register_length_dists);
  return registry;
}

int64_t LengthDist::sample(Rng& rng) const {
  switch (type_) {
    case Type::kFixed: return lo_;
    case Type::kUniform: return rng.uniform_int(lo_, hi_);
    case Type::kLognormal: {
      const double x = std::exp(mu_ + sigma_ * rng.normal());
      if (!(x < static_cast<double>(hi_))) return hi_;
      return std::clamp(static_cast<int64_t>(std::llround(x)), lo_, hi_);
    }
    case Type::kMixture: {
      const double u = rng.uniform01();
      size_t i = static_cast<size_t>(std::upper_bound(cumulative_.begin(), cumulative_.end(), u) -
                                     cumulative_.begin());
      return components_[std::min(i, components_.size() - 1)].sample(rng);
    }
  }
  return lo_;
}

int64_t LengthDist::max_value() const {
  if (type_ != Type::kMixture) return hi_;
  int64_t m = 1;
  for (const auto& c : components_) m = std::max(m, c.max_value());
  return m;
}

}  // namespace kvsim
