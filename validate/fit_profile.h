// Fits a latency profile's coefficients to measurements: for every profile class with training
// points, its efficiencies, launch overhead and curve parameters (flash: sequence half-point and
// head-dim exponent; decode: context and block-size half-points) minimise the sum of squared
// relative errors of the model's own per-operation predictions (validate/kernel_model.h).
// The solver is Levenberg-Marquardt on Eigen's normal equations with central-difference
// Jacobians, over unconstrained transforms of the parameters (logistic for efficiencies, exp for
// positive quantities), so the result always satisfies the profile format's bounds. Parameters
// the data cannot determine (a zero Jacobian column, e.g. the compute efficiency of a class that
// is memory-bound at every measured shape) keep kvsim's default value and are reported as kept.
// The start profile picks the forms: with `flash_tiles` the flash class fits the tiles' per-wave
// overhead instead of the flash curve (and keeps its memory efficiency); with an
// `elementwise_l2_speedup` above 1 the elementwise class fits the speedup too, and the latency
// terms (per CTA, per serial load) where its train rows have CTAs or serial loads.
#pragma once

#include <string>
#include <vector>

#include "models/gpu_spec.h"
#include "models/latency/profile.h"
#include "validate/measurements.h"

namespace kvsim::validate {

struct ClassFit {
  OpClass op_class = OpClass::kGemm;
  int train_points = 0;
  double rms_rel = 0;  // sqrt(mean(((pred - measured) / measured)^2)) over the train points
  double mape = 0;     // mean |pred - measured| / measured
  double max_rel = 0;
  std::vector<std::string> fitted;  // parameter names the data determined
  std::vector<std::string> kept;    // left at their defaults
};

struct Residual {
  const Measurement* m = nullptr;
  double predicted = 0;
  double rel_error = 0;  // (predicted - measured) / measured
};

struct FitResult {
  Profile profile;
  std::vector<ClassFit> classes;    // classes with training points, in OpClass order
  std::vector<Residual> residuals;  // every train point, after the fit
};

// Fits on rows with split "train" that were timed. `start` supplies the values of everything not
// fitted (and of parameters the data leaves undetermined). `provenance` goes into the sources.
FitResult fit_profile(const std::vector<Measurement>& rows, const GpuSpec& gpu,
                      const Profile& start, const std::string& provenance);

}  // namespace kvsim::validate
