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
  // instant): every area is 0.
  if (t == last_t_) return;
  const Int128 dt = t - last_t_;
  auto area2 = [&](int64_t a, int64_t b) {  // twice the area
    return end ? dt * (static_cast<Int128>(a) + b) : 2 * dt * a;
  };
  const KvSample& e = end ? *end : last_;
  live_ += area2(last_.live_bytes, e.live_bytes);
  internal_ += area2(last_.internal_bytes, e.internal_bytes);
  reservation_ += area2(last_.reservation_bytes, e.reservation_bytes);
  external_ += area2(last_.external_bytes, e.external_bytes);
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

void KvWasteAccumulator::hold_run(SimTime t_first, const KvSample& first,
                                  const std::array<Int128, 4>& area2, SimTime t_last,
                                  const KvSample& last, int64_t peak_footprint, int64_t peak_live) {
  KVSIM_CHECK(t_last >= t_first, "a run from {} back to {}", t_first, t_last);
  hold(t_first, first);
  live_ += area2[0];
  internal_ += area2[1];
  reservation_ += area2[2];
  external_ += area2[3];
  last_t_ = t_last;
  last_ = last;
  peak_footprint_ = std::max(peak_footprint_, peak_footprint);
  peak_live_ = std::max(peak_live_, peak_live);
}

KvWasteSummary KvWasteAccumulator::summary(SimTime t_end) const {
  KvWasteSummary out;
  if (!started_) return out;
  KvWasteAccumulator closed = *this;
  closed.integrate_to(std::max(t_end, last_t_), nullptr);
  const Int128 foot = closed.live_ + closed.internal_ + closed.reservation_ + closed.external_;
  out.duration = std::max(t_end, last_t_) - first_t_;
  out.peak_footprint_bytes = peak_footprint_;
  out.peak_live_bytes = peak_live_;
  const auto ld = [](Int128 v) { return static_cast<long double>(v); };
  if (foot > 0) {
    out.usage_efficiency = static_cast<double>(ld(closed.live_) / ld(foot));
    out.internal_fraction = static_cast<double>(ld(closed.internal_) / ld(foot));
    out.reservation_fraction = static_cast<double>(ld(closed.reservation_) / ld(foot));
    out.external_fraction = static_cast<double>(ld(closed.external_) / ld(foot));
  }
  if (out.duration > 0) {
    const long double span2 = 2 * static_cast<long double>(out.duration);  // areas are doubled
    out.mean_live_bytes = static_cast<double>(ld(closed.live_) / span2);
    out.mean_footprint_bytes = static_cast<double>(ld(foot) / span2);
  }
  return out;
}

}  // namespace kvsim
