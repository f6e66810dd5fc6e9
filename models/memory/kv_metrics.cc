#include "models/memory/kv_metrics.h"

#include <algorithm>

#include "core/check.h"

namespace kvsim {

KvSample KvSample::from(const KvUsage& u) {
  return {u.live_bytes, u.internal_bytes, u.reservation_bytes, u.external_bytes};
}

KvSample KvSample::from(const MemorySnapshot& s) {
  return {s.kv_live_bytes, s.kv_internal_bytes, s.kv_reservation_bytes, s.kv_external_bytes};
}

// Adds the area from last_t_ to t: a rectangle of last_ (hold), or a trapezoid to *end (ramp).
void KvWasteAccumulator::integrate_to(SimTime t, const KvSample* end) {
  KVSIM_CHECK(t >= last_t_, "time went back: {} after {}", t, last_t_);
  // No time passed (the engine records an iteration's end and the next one's start at the same
  // instant): every area is +0, which leaves the sums' bits as they are, so skip the arithmetic.
  if (t == last_t_) return;
  const long double dt = static_cast<long double>(t - last_t_);
  auto area = [&](int64_t a, int64_t b) {
    return end ? dt * (static_cast<long double>(a) + static_cast<long double>(b)) / 2
               : dt * static_cast<long double>(a);
  };
  const KvSample& e = end ? *end : last_;
  live_ += area(last_.live_bytes, e.live_bytes);
  internal_ += area(last_.internal_bytes, e.internal_bytes);
  reservation_ += area(last_.reservation_bytes, e.reservation_bytes);
  external_ += area(last_.external_bytes, e.external_bytes);
}

void KvWasteAccumulator::hold(SimTime t, const KvSample& s) {
  if (!started_) {
    started_ = true;
    first_t_ = t;
  } else {
    integrate_to(t, nullptr);
  }
  last_t_ = t;
  last_ = s;
  peak_footprint_ = std::max(peak_footprint_, s.footprint_bytes());
  peak_live_ = std::max(peak_live_, s.live_bytes);
}

void KvWasteAccumulator::ramp(SimTime t, const KvSample& s) {
  if (!started_) {
    hold(t, s);
    return;
  }
  integrate_to(t, &s);
  last_t_ = t;
  last_ = s;
  peak_footprint_ = std::max(peak_footprint_, s.footprint_bytes());
  peak_live_ = std::max(peak_live_, s.live_bytes);
}

KvWasteSummary KvWasteAccumulator::summary(SimTime t_end) const {
  KvWasteSummary out;
  if (!started_) return out;
  KvWasteAccumulator closed = *this;
  closed.integrate_to(std::max(t_end, last_t_), nullptr);
  const long double foot = closed.live_ + closed.internal_ + closed.reservation_ + closed.external_;
  out.duration = std::max(t_end, last_t_) - first_t_;
  out.peak_footprint_bytes = peak_footprint_;
  out.peak_live_bytes = peak_live_;
  if (foot > 0) {
    out.usage_efficiency = static_cast<double>(closed.live_ / foot);
    out.internal_fraction = static_cast<double>(closed.internal_ / foot);
    out.reservation_fraction = static_cast<double>(closed.reservation_ / foot);
    out.external_fraction = static_cast<double>(closed.external_ / foot);
  }
  if (out.duration > 0) {
    out.mean_live_bytes = static_cast<double>(closed.live_ / out.duration);
    out.mean_footprint_bytes = static_cast<double>(foot / out.duration);
  }
  return out;
}

}  // namespace kvsim
