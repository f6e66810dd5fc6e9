// Tolerance checks of a kernel's output against its reference: element i passes when
// |ref - got| <= atol + rtol * |ref|, with atol/rtol from one per-precision table.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu_ref/precision.h"

namespace kvsim::kernels {

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// The one table. FP16 keeps 11 significant bits and BF16 8; attention outputs are averages of
// values in [-1, 1] that pass through a rounded probability matrix, so a few units in the last
// place of the output's precision is what a correct kernel shows.
Tolerance tolerance_for(Precision p);

struct CheckReport {
  bool passed = true;
  int64_t elements = 0;
  int64_t bad = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;        // |ref - got| / |ref| over elements with ref != 0
  std::vector<int64_t> first_bad;  // up to 5 flat indices
  std::vector<std::pair<double, double>> first_bad_values;  // (ref, got) at those indices
  // One line: "<what> <shape>: PASS max abs 1.2e-04 max rel 3.0e-03" or FAIL with the first bad
  // indices and values.
  std::string summary(const std::string& what, const std::string& shape) const;
};

// Compares element by element; NaN or inf in `got` where `ref` is finite counts as bad.
// Requires: ref.size() == got.size().
CheckReport check_close(std::span<const float> ref, std::span<const float> got, Tolerance tol);

}  // namespace kvsim::kernels
