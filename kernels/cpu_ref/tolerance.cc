#include "kernels/cpu_ref/tolerance.h"

#include <fmt/format.h>

#include <cmath>

#include "core/check.h"

namespace kvsim::kernels {

Tolerance tolerance_for(Precision p) {
  switch (p) {
    case Precision::kFp16: return {.atol = 2e-3, .rtol = 1e-2};
    case Precision::kBf16: return {.atol = 1.6e-2, .rtol = 2e-2};
    // Float32 sums in another order than the reference: a few ulps per term, far below this.
    case Precision::kFp32: return {.atol = 1e-4, .rtol = 1e-3};
  }
  return {};
}

CheckReport check_close(std::span<const float> ref, std::span<const float> got, Tolerance tol) {
  KVSIM_CHECK(ref.size() == got.size(), "reference has {} elements, result {}", ref.size(),
              got.size());
  CheckReport r;
  r.elements = static_cast<int64_t>(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const double a = ref[i];
    const double b = got[i];
    const double err = std::abs(a - b);
    const bool ok = std::isfinite(b) == std::isfinite(a) &&
                    (!std::isfinite(a) || err <= tol.atol + tol.rtol * std::abs(a));
    if (std::isfinite(err)) {
      r.max_abs_error = std::max(r.max_abs_error, err);
      if (a != 0) r.max_rel_error = std::max(r.max_rel_error, err / std::abs(a));
    } else if (!ok) {
      r.max_abs_error = INFINITY;
    }
    if (!ok) {
      ++r.bad;
      if (r.first_bad.size() < 5) {
        r.first_bad.push_back(static_cast<int64_t>(i));
        r.first_bad_values.emplace_back(a, b);
      }
    }
  }
  r.passed = r.bad == 0;
  return r;
}

std::string CheckReport::summary(const std::string& what, const std::string& shape) const {
  std::string s = fmt::format("{} {}: {} max abs {:.3e} max rel {:.3e}", what, shape,
                              passed ? "PASS" : "FAIL", max_abs_error, max_rel_error);
  if (!passed) {
    s += fmt::format(" ({} of {} elements out of tolerance; first at", bad, elements);
    for (size_t i = 0; i < first_bad.size(); ++i) {
      s += fmt::format(" [{}] ref {:.6g} got {:.6g}", first_bad[i], first_bad_values[i].first,
                       first_bad_values[i].second);
    }
    s += ")";
  }
  return s;
}

}  // namespace kvsim::kernels
