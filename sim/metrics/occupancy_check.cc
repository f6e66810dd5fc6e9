// check_occupancy (sim/metrics/recorder.h): the occupancy figures' invariant, checked in checking
// mode after each policy.
#include <string>

#include "core/check.h"
#include "sim/metrics/recorder.h"

namespace kvsim {

void check_occupancy(const PolicySummary& s) {
  // The mean and the peak are two divisions of exact integers by the pool; a mean equal to the
  // peak (KV held at its peak all along) may land an ulp or two above it.
  const auto check = [&](double peak, double mean, const std::string& replica) {
    KVSIM_CHECK(mean >= 0 && mean <= peak * (1 + 1e-12) && peak <= 1,
                "policy {}{}: KV pool occupancy mean {} and peak {} break 0 <= mean <= peak <= 1",
                s.name, replica.empty() ? "" : ", replica " + replica, mean, peak);
  };
  check(s.kv_pool_peak_occupancy, s.kv_pool_mean_occupancy, "");
  if (s.cluster) {
    for (const ReplicaSummary& r : s.cluster->replicas) {
      check(r.kv_pool_peak_occupancy, r.kv_pool_mean_occupancy, r.label);
    }
  }
}

}  // namespace kvsim
