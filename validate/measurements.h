// measurements.csv: one row per grid case with its shape, correctness check and timing, and the
// achieved rates. measure writes it; calibrate and compare read it back.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "validate/kernel_case.h"

namespace kvsim::validate {

struct Measurement {
  KernelCase c;
  std::string check = "-";  // "pass", "fail", or "-" (not checked: too large)
  double max_abs_error = 0;
  double max_rel_error = 0;
  int reps = 0;        // 0 when skipped
  double seconds = 0;  // median of the timed runs
  double seconds_min = 0;
  double seconds_p10 = 0;
  double seconds_p90 = 0;
  std::string skipped;  // why the case did not run ("" when it did)

  bool timed() const { return reps > 0 && seconds > 0; }
  double flop_per_s() const { return timed() ? c.flops() / seconds : 0; }
  double bytes_per_s() const { return timed() ? c.bytes_moved() / seconds : 0; }
  double spread() const { return timed() ? (seconds_p90 - seconds_p10) / seconds : 0; }
};

// The header line, and one row; floats with 9 significant digits.
std::string measurements_csv_header();
std::string measurements_csv_row(const Measurement& m);
std::string measurements_csv(const std::vector<Measurement>& rows);

// Reads a measurements.csv. Throws InputError "<file>:<line>: ..." on a wrong header, a bad value
// or an invalid shape.
std::vector<Measurement> read_measurements(const std::filesystem::path& path);

}  // namespace kvsim::validate
