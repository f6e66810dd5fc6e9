#include "workloads/lengths.h"

#include <algorithm>
#include <cmath>

#include "core/config_node.h"
#include "core/check.h"

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
  if (!n.is_map()) n.fail_expected("a length distribution {type: fixed|uniform|lognormal|mixture}");
  const std::string type = n.get_enum("type", {"fixed", "uniform", "lognormal", "mixture"});
  const Bounds count{.min = 1, .max = kMaxTokens};
  if (type == "fixed") return LengthDist::fixed(n.get<int64_t>("value", count));
  if (type == "uniform") {
    const int64_t lo = n.get<int64_t>("min", count);
    const int64_t hi = n.get<int64_t>("max", {.min = static_cast<double>(lo), .max = kMaxTokens});
    return LengthDist::uniform(lo, hi);
  }
  if (type == "lognormal") {
    const double sigma = n.get<double>("sigma", {.min = 0, .max = 10});
    double mu = 0;
    if (n.has("median") == n.has("mean")) n.fail("lognormal: give exactly one of median or mean");
    if (n.has("median")) {
      mu = std::log(n.get<double>("median", {.min = 0, .max = kMaxTokens, .min_exclusive = true}));
    } else {
      // E[X] = exp(mu + sigma^2 / 2).
      mu = std::log(n.get<double>("mean", {.min = 0, .max = kMaxTokens, .min_exclusive = true})) -
           0.5 * sigma * sigma;
    }
    const int64_t lo = n.get<int64_t>("min", 1, count);
    const int64_t hi = n.get<int64_t>("max", static_cast<int64_t>(kMaxTokens),
                                      {.min = static_cast<double>(lo), .max = kMaxTokens});
    return LengthDist::lognormal(mu, sigma, lo, hi);
  }
  return parse_mixture(n, depth);
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

int64_t LengthDist::sample(Rng& rng) const {
  switch (type_) {
    case Type::kFixed:
      return lo_;
    case Type::kUniform:
      return rng.uniform_int(lo_, hi_);
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
