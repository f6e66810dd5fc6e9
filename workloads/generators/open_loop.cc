#include "workloads/generators/open_loop.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/config_node.h"

namespace kvsim {

namespace {
// Sub-stream numbers for derive_seed(): fixed forever, or the same seed gives other traffic.
constexpr uint64_t kArrivalStream = 1, kPromptStream = 2, kOutputStream = 3, kBurstStream = 100;

// An arrival process of `type` at the node's `rate`.
ArrivalProcess read_rate(const ConfigNode& n, ArrivalProcess::Type type) {
  ArrivalProcess a;
  a.type = type;
  a.rate_per_s = n.get<double>("rate", {.min = 0, .max = 1e9, .min_exclusive = true});
  return a;
}

}  // namespace

void register_arrival_processes(ArrivalProcessRegistry& r) {
  using Type = ArrivalProcess::Type;
  r.add({"poisson",
         "exponential gaps at `rate` per second",
         {"rate"},
         {"{type: poisson, rate: 2}",
          [](const ConfigNode& n) { return read_rate(n, Type::kPoisson); }}});
  r.add({"gamma",
         "Gamma gaps with coefficient of variation `cv` (> 1: bursty)",
         {"rate", "cv"},
         {"{type: gamma, rate: 2, cv: 4}", [](const ConfigNode& n) {
            ArrivalProcess a = read_rate(n, Type::kGamma);
            a.cv = n.get<double>("cv", {.min = 0, .max = 100, .min_exclusive = true});
            return a;
          }}});
  r.add(
      {"fixed",
       "exactly k/rate seconds, k = 1, 2, ...",
       {"rate"},
       {"{type: fixed, rate: 2}", [](const ConfigNode& n) { return read_rate(n, Type::kFixed); }}});
}

const ArrivalProcessRegistry& arrival_process_registry() {
  static const ArrivalProcessRegistry registry =
      ArrivalProcessRegistry::filled("arrival process", register_arrival_processes);
  return registry;
}

ArrivalProcess ArrivalProcess::parse(const ConfigNode& n) {
  const ArrivalProcessRegistry& registry = arrival_process_registry();
  if (!n.is_map()) {
    n.fail_expected("arrivals {type: " + registry_choices(registry) + ", rate: R}");
  }
  const auto& entry = registry.choose(n);
  n.allow(entry.keys);
  return entry.make.parse(n);
}

Burst Burst::parse(const ConfigNode& n) {
  if (!n.is_map()) n.fail_expected("a burst {at_s, count, prompt_tokens, output_tokens}");
  Burst b;
  b.at = seconds_to_sim(n.get<double>("at_s", {.min = 0, .max = 1e9}));
  b.over = seconds_to_sim(n.get<double>("over_s", 0.0, {.min = 0, .max = 1e9}));
  b.count = n.get<int64_t>("count", {.min = 1, .max = 1e9});
  b.prompt_tokens = LengthDist::parse(n.child("prompt_tokens"));
  b.output_tokens = LengthDist::parse(n.child("output_tokens"));
  b.priority = n.get_optional<int64_t>("priority", {.min = -1e15, .max = 1e15});
  if (auto q = n.get_optional<double>("max_queue_time_s",
                                      {.min = 0, .max = 1e9, .min_exclusive = true})) {
    b.max_queue_time = seconds_to_sim(*q);
  }
  return b;
}

OpenLoopSource::OpenLoopSource(OpenLoopParams params, uint64_t seed,
                               std::shared_ptr<int64_t> next_id)
    : p_(std::move(params)),
      arrival_rng_(derive_seed(seed, kArrivalStream)),
      prompt_rng_(derive_seed(seed, kPromptStream)),
      output_rng_(derive_seed(seed, kOutputStream)),
      next_id_(std::move(next_id)) {
  KVSIM_CHECK(next_id_ != nullptr, "null id counter");
  // Each burst keeps the stream of its position in the scenario's list, then they are ordered.
  for (size_t i = 0; i < p_.bursts.size(); ++i) {
    burst_rngs_.emplace_back(derive_seed(seed, kBurstStream + i));
  }
  std::vector<size_t> order(p_.bursts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return p_.bursts[a].at < p_.bursts[b].at; });
  std::vector<Burst> bursts;
  std::vector<Rng> rngs;
  for (size_t i : order) {
    bursts.push_back(p_.bursts[i]);
    rngs.push_back(burst_rngs_[i]);
  }
  p_.bursts = std::move(bursts);
  burst_rngs_ = std::move(rngs);
  base_done_ = !p_.arrivals.has_value();
}

std::optional<SimTime> OpenLoopSource::next_base_time() {
  const ArrivalProcess& a = *p_.arrivals;
  ++base_drawn_;
  switch (a.type) {
    case ArrivalProcess::Type::kFixed:
      // k / rate from the origin, not a running sum: no drift over a million arrivals.
      return seconds_to_sim(static_cast<double>(base_drawn_) / a.rate_per_s);
    case ArrivalProcess::Type::kPoisson:
      clock_ += seconds_to_sim(arrival_rng_.exponential(1.0 / a.rate_per_s));
      return clock_;
    case ArrivalProcess::Type::kGamma: {
      // Gaps ~ Gamma(k, theta) with k = 1/cv^2 and mean k*theta = 1/rate.
      const double k = 1.0 / (a.cv * a.cv);
      clock_ += seconds_to_sim(arrival_rng_.gamma(k) / (k * a.rate_per_s));
      return clock_;
    }
  }
  return std::nullopt;
}

void OpenLoopSource::peek_base() {
  if (base_done_ || base_next_) return;
  if (p_.max_requests && base_drawn_ >= *p_.max_requests) {
    base_done_ = true;
    return;
  }
  base_next_ = next_base_time();
  if (p_.duration && *base_next_ >= *p_.duration) {
    base_next_.reset();
    base_done_ = true;
  }
}

std::optional<RequestSpec> OpenLoopSource::next() {
  peek_base();
  std::optional<SimTime> burst_t;
  if (burst_index_ < p_.bursts.size()) {
    const Burst& b = p_.bursts[burst_index_];
    burst_t = b.at + (b.over == 0 ? 0
                                  : seconds_to_sim(sim_to_seconds(b.over) *
                                                   static_cast<double>(burst_pos_) /
                                                   static_cast<double>(b.count)));
  }
  if (!base_next_ && !burst_t) return std::nullopt;
  RequestSpec r;
  r.id = (*next_id_)++;
  if (base_next_ && (!burst_t || *base_next_ <= *burst_t)) {
    r.arrival = *base_next_;
    r.prompt_tokens = p_.prompt_tokens.sample(prompt_rng_);
    r.output_tokens = p_.output_tokens.sample(output_rng_);
    r.priority = p_.tags.priority;
    r.max_queue_time = p_.tags.max_queue_time;
    base_next_.reset();
    ++base_emitted_;
  } else {
    const Burst& b = p_.bursts[burst_index_];
    Rng& rng = burst_rngs_[burst_index_];
    r.arrival = *burst_t;
    r.prompt_tokens = b.prompt_tokens.sample(rng);
    r.output_tokens = b.output_tokens.sample(rng);
    r.priority = b.priority.value_or(p_.tags.priority);
    r.max_queue_time = b.max_queue_time ? b.max_queue_time : p_.tags.max_queue_time;
    if (++burst_pos_ == b.count) {
      ++burst_index_;
      burst_pos_ = 0;
    }
  }
  return r;
}

}  // namespace kvsim
