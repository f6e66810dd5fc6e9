// Time series and time-weighted means of KV usage and waste, with the one definition of
// kv_store.h: every fraction is a byte figure over the KV footprint. A time-weighted mean is a
// ratio of time integrals (∫live dt / ∫footprint dt), never a mean of instantaneous ratios, so
// idle instants with an empty store do not count.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/int128.h"
#include "core/sim_time.h"
#include "models/memory/kv_store.h"
#include "models/memory/memory_snapshot.h"

namespace kvsim {

// The figures of one instant (from a KvUsage or a MemorySnapshot).
struct KvSample {
  int64_t live_bytes = 0;
  int64_t internal_bytes = 0;
  int64_t reservation_bytes = 0;
  int64_t external_bytes = 0;

  static KvSample from(const KvUsage& u);
  static KvSample from(const MemorySnapshot& s);
  int64_t footprint_bytes() const {
    return live_bytes + internal_bytes + reservation_bytes + external_bytes;
  }
};

struct KvWasteSummary {
  double usage_efficiency = 1.0;  // ∫live / ∫footprint; 1 when nothing was ever held
  double internal_fraction = 0;
  double reservation_fraction = 0;
  double external_fraction = 0;
  double mean_live_bytes = 0;  // time-weighted means
  double mean_footprint_bytes = 0;
  int64_t peak_footprint_bytes = 0;
  int64_t peak_live_bytes = 0;
  SimTime duration = 0;
};

// Feeds (time, sample) pairs in non-decreasing time. hold(): the sample's values hold from t
// until the next call (figures that jump at events). ramp(): the figures moved linearly from the
// previous sample to this one (a fast-forwarded decode run, where live grows by one token per
// iteration per request); exact for such runs.
class KvWasteAccumulator {
 public:
  // Requires: t >= the previous call's t.
  void hold(SimTime t, const KvSample& s);
  void ramp(SimTime t, const KvSample& s);
  // A run of hold() calls at once: hold(t_first, first), then samples whose intervals up to
  // t_last have the areas `area2` (twice the byte-ns of live, internal, reservation and external,
  // as kept), the last of them `last` (held from t_last on); `peak`: the largest footprint and
  // live bytes among the run's samples. The same sums as the calls.
  void hold_run(SimTime t_first, const KvSample& first, const std::array<Int128, 4>& area2,
                SimTime t_last, const KvSample& last, int64_t peak_footprint, int64_t peak_live);
  // Closes the last interval at `t_end` (>= last t) and summarises.
  KvWasteSummary summary(SimTime t_end) const;
  bool empty() const { return !started_; }

 private:
  void integrate_to(SimTime t, const KvSample* end);
  bool started_ = false;
  SimTime last_t_ = 0;
  KvSample last_{};
  // Integrals in half byte-nanoseconds (a trapezoid's area is a multiple of a half), exact
  // integers (1e11 B x 1e13 ns overflows int64): any order of addition gives the same sums.
  Int128 live_ = 0, internal_ = 0, reservation_ = 0, external_ = 0;
  int64_t peak_footprint_ = 0, peak_live_ = 0;
  SimTime first_t_ = 0;
};

// A time series of snapshots, for timeseries.csv.
struct MemorySample {
  SimTime t = 0;
  MemorySnapshot snapshot;
};

}  // namespace kvsim
