#include "validate/fit_profile.h"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "validate/kernel_model.h"

namespace kvsim::validate {

namespace {

enum class Transform { kEfficiency, kPositive, kExponent, kAboveOne };

struct Param {
  std::string name;
  Transform t;
  std::function<double&(Profile&)> ref;
};

double to_value(Transform t, double x) {
  switch (t) {
    case Transform::kEfficiency: return 1.0 / (1.0 + std::exp(-x));
    case Transform::kPositive: return std::exp(x);
    case Transform::kExponent: return 4.0 / (1.0 + std::exp(-x));
    case Transform::kAboveOne: return 1.0 + std::exp(x);
  }
  return 0;
}

double to_x(Transform t, double v) {
  switch (t) {
    case Transform::kEfficiency: v = std::clamp(v, 1e-6, 1.0 - 1e-6); return std::log(v / (1 - v));
    case Transform::kPositive: return std::log(std::max(v, 1e-12));
    case Transform::kExponent: v = std::clamp(v, 1e-4, 4.0 - 1e-4); return std::log(v / (4.0 - v));
    case Transform::kAboveOne: return std::log(std::max(v - 1.0, 1e-12));
  }
  return 0;
}

// A class's fitted parameters, by the forms the start profile uses: `tiles`, flash attention
// from its tiles (Profile::flash_tiles), whose per-wave overhead replaces the flash curve's
// parameters; `l2`, elementwise bytes served from L2 (a start speedup above 1), whose speedup is
// fitted with the class's HBM efficiency.
std::vector<Param> params_of(OpClass c, bool tiles, bool l2) {
  auto cls = [c](auto member) {
    return [c, member](Profile& p) -> double& { return p.of(c).*member; };
  };
  std::vector<Param> out;
  if (c != OpClass::kElementwise) {
    out.push_back(
        {"compute_efficiency", Transform::kEfficiency, cls(&ClassParams::compute_efficiency)});
  }
  // Prefill-only chunks leave the tiled kernel compute-bound: its memory efficiency, which only
  // mixed batches of long decodes reach, would drift unchecked; it keeps the start's value.
  if (!(c == OpClass::kAttentionFlash && tiles)) {
    out.push_back(
        {"memory_efficiency", Transform::kEfficiency, cls(&ClassParams::memory_efficiency)});
  }
  out.push_back({"launch_overhead_us", Transform::kPositive, cls(&ClassParams::launch_overhead_s)});
  if (c == OpClass::kElementwise && l2) {
    out.push_back({"elementwise_l2_speedup", Transform::kAboveOne,
                   [](Profile& p) -> double& { return p.elementwise_l2_speedup; }});
    // The latency terms; kept (0) where no train row has CTAs or serial loads.
    out.push_back({"elementwise_cta_us", Transform::kPositive,
                   [](Profile& p) -> double& { return p.elementwise_cta_s; }});
    out.push_back({"elementwise_serial_load_us", Transform::kPositive,
                   [](Profile& p) -> double& { return p.elementwise_serial_load_s; }});
  }
  if (c == OpClass::kAttentionFlash && tiles) {
    out.push_back({"wave_overhead_us", Transform::kPositive,
                   [](Profile& p) -> double& { return p.flash_tiles.wave_overhead_s; }});
  } else if (c == OpClass::kAttentionFlash) {
    out.push_back({"flash_seq_half_tokens", Transform::kPositive,
                   [](Profile& p) -> double& { return p.flash_seq_half_tokens; }});
    out.push_back({"flash_head_dim_exponent", Transform::kExponent,
                   [](Profile& p) -> double& { return p.flash_head_dim_exponent; }});
  }
  if (c == OpClass::kAttentionDecode) {
    out.push_back({"decode_context_half_tokens", Transform::kPositive,
                   [](Profile& p) -> double& { return p.decode_context_half_tokens; }});
    out.push_back({"paged_block_half_tokens", Transform::kPositive,
                   [](Profile& p) -> double& { return p.paged_block_half_tokens; }});
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One class's least-squares problem.
class ClassProblem {
 public:
  ClassProblem(OpClass c, std::vector<const Measurement*> pts, const GpuSpec& gpu, Profile base)
      : c_(c),
        pts_(std::move(pts)),
        gpu_(gpu),
        base_(std::move(base)),
        params_(params_of(c, base_.flash_tiles.fitted, base_.elementwise_l2_speedup > 1.0)) {}

  const std::vector<Param>& params() const { return params_; }

  Profile profile_at(const Eigen::VectorXd& x) const {
    Profile p = base_;
    for (size_t i = 0; i < params_.size(); ++i) {
      params_[i].ref(p) = to_value(params_[i].t, x[static_cast<Eigen::Index>(i)]);
    }
    return p;
  }

  Eigen::VectorXd residuals(const Eigen::VectorXd& x) const { return residuals_of(profile_at(x)); }

  Eigen::VectorXd residuals_of(const Profile& p) const {
    Eigen::VectorXd r(static_cast<Eigen::Index>(pts_.size()));
    const KernelPredictor predictor(gpu_, p);
    for (size_t i = 0; i < pts_.size(); ++i) {
      const double pred = *predictor.seconds(pts_[i]->c);
      r[static_cast<Eigen::Index>(i)] = pred / pts_[i]->seconds - 1.0;
    }
    return r;
  }

  Eigen::MatrixXd jacobian(const Eigen::VectorXd& x) const {
    const double h = 1e-5;
    Eigen::MatrixXd j(static_cast<Eigen::Index>(pts_.size()), x.size());
    for (Eigen::Index k = 0; k < x.size(); ++k) {
      Eigen::VectorXd a = x, b = x;
      a[k] += h;
      b[k] -= h;
      j.col(k) = (residuals(a) - residuals(b)) / (2 * h);
    }
    return j;
  }

  // Starting point: median achieved efficiencies, a launch overhead well below the fastest point.
  Eigen::VectorXd start(const std::vector<double>& curve_starts) const {
    std::vector<double> ce, me, t;
    for (const Measurement* m : pts_) {
      if (m->c.flops() > 0) ce.push_back(m->c.flops() / (m->seconds * gpu_.fp16_flops));
      me.push_back(m->c.bytes_moved() / (m->seconds * gpu_.hbm_bytes_per_s));
      t.push_back(m->seconds);
    }
    Eigen::VectorXd x(static_cast<Eigen::Index>(params_.size()));
    size_t curve = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      const std::string& n = params_[i].name;
      double v = 0;
      if (n == "compute_efficiency")
        v = std::clamp(median(ce), 1e-4, 0.95);
      else if (n == "memory_efficiency")
        v = std::clamp(median(me), 1e-4, 0.95);
      else if (n == "launch_overhead_us")
        v = 0.05 * *std::min_element(t.begin(), t.end());
      else if (n == "flash_head_dim_exponent")
        v = 0.5;
      else if (n == "elementwise_l2_speedup")
        v = 2.0;
      else if (n == "elementwise_cta_us")
        v = 50e-9;  // a CTA's scheduling and reduction, tens of ns
      else if (n == "elementwise_serial_load_us")
        v = 0.2e-6;  // a dependent load's round trip to memory, hundreds of ns
      else if (n == "wave_overhead_us")
        v = 0.2 * *std::min_element(t.begin(), t.end());
      else
        v = curve < curve_starts.size() ? curve_starts[curve++] : 64.0;
      x[static_cast<Eigen::Index>(i)] = to_x(params_[i].t, v);
    }
    return x;
  }

  size_t points() const { return pts_.size(); }

 private:
  OpClass c_;
  std::vector<const Measurement*> pts_;
  const GpuSpec& gpu_;
  Profile base_;
  std::vector<Param> params_;
};

// Levenberg-Marquardt from x; returns the best x found.
Eigen::VectorXd levenberg_marquardt(const ClassProblem& prob, Eigen::VectorXd x) {
  Eigen::VectorXd r = prob.residuals(x);
  double cost = r.squaredNorm();
  double lambda = 1e-3;
  for (int iter = 0; iter < 300; ++iter) {
    const Eigen::MatrixXd j = prob.jacobian(x);
    const Eigen::MatrixXd a = j.transpose() * j;
    const Eigen::VectorXd g = j.transpose() * r;
    bool improved = false;
    while (lambda < 1e12) {
      Eigen::MatrixXd damped = a;
      for (Eigen::Index k = 0; k < x.size(); ++k) {
        damped(k, k) += lambda * (a(k, k) > 0 ? a(k, k) : 1.0);
      }
      const Eigen::VectorXd step = damped.ldlt().solve(-g);
      const Eigen::VectorXd xn = x + step;
      const Eigen::VectorXd rn = prob.residuals(xn);
      const double cn = rn.squaredNorm();
      if (std::isfinite(cn) && cn < cost) {
        const double gain = cost - cn;
        x = xn;
        r = rn;
        cost = cn;
        lambda = std::max(lambda / 3, 1e-12);
        improved = true;
        if (gain < 1e-14 * std::max(cost, 1e-30) || step.norm() < 1e-10) return x;
        break;
      }
      lambda *= 4;
    }
    if (!improved) break;
  }
  return x;
}

// Whether parameter i matters to the train points at the fitted profile: moving its value to the
// default, and to half/double its fitted value, must change some prediction. (Tested on values,
// not on the transformed variable, so a launch overhead fitted to ~0 counts as determined.)
bool matters(const ClassProblem& prob, const Profile& fitted, const Param& param,
             double default_value) {
  Profile base = fitted;
  const double v = param.ref(base);
  const Eigen::VectorXd r0 = prob.residuals_of(base);
  const double half_or_double = param.t == Transform::kEfficiency && v > 0.5 ? v / 2 : v * 2;
  for (double trial : {default_value, half_or_double, v > 0 ? v / 2 : 1.0}) {
    Profile p = fitted;
    param.ref(p) = trial;
    if ((prob.residuals_of(p) - r0).cwiseAbs().maxCoeff() > 1e-9) return true;
  }
  return false;
}

ClassFit fit_class(OpClass c, const std::vector<const Measurement*>& pts, const GpuSpec& gpu,
                   Profile& profile, const Profile& defaults) {
  ClassProblem prob(c, pts, gpu, profile);
  // The max() in the roofline makes the problem piecewise smooth: try a few starting points for
  // the curve parameters and keep the best fit.
  std::vector<std::vector<double>> starts = {{64.0, 4.0}};
  if (c == OpClass::kAttentionFlash && !profile.flash_tiles.fitted)
    starts = {{64.0}, {512.0}, {4096.0}};
  if (c == OpClass::kAttentionDecode) starts = {{16.0, 1.0}, {256.0, 8.0}, {2048.0, 32.0}};
  Eigen::VectorXd best;
  double best_cost = INFINITY;
  for (const auto& s : starts) {
    const Eigen::VectorXd x = levenberg_marquardt(prob, prob.start(s));
    const double cost = prob.residuals(x).squaredNorm();
    if (cost < best_cost) {
      best_cost = cost;
      best = x;
    }
  }
  ClassFit fit;
  fit.op_class = c;
  fit.train_points = static_cast<int>(pts.size());
  Profile fitted = prob.profile_at(best);
  Profile kept_values = defaults;
  const auto& ps = prob.params();
  for (size_t i = 0; i < ps.size(); ++i) {
    if (matters(prob, fitted, ps[i], ps[i].ref(kept_values))) {
      // exp() never reaches 0: a launch overhead or half-point driven to ~0 is written as 0.
      const double v = ps[i].ref(fitted);
      ps[i].ref(profile) = ps[i].t == Transform::kPositive && v < 1e-12 ? 0.0 : v;
      fit.fitted.push_back(ps[i].name);
    } else {
      ps[i].ref(profile) = ps[i].ref(kept_values);
      fit.kept.push_back(ps[i].name);
    }
  }
  return fit;
}

}  // namespace

FitResult fit_profile(const std::vector<Measurement>& rows, const GpuSpec& gpu,
                      const Profile& start, const std::string& provenance) {
  std::map<OpClass, std::vector<const Measurement*>> by_class;
  for (const Measurement& m : rows) {
    if (m.c.split != "train" || !m.timed()) continue;
    if (auto c = model_class(m.c)) by_class[*c].push_back(&m);
  }
  FitResult out;
  out.profile = start;
  for (auto& [c, pts] : by_class) {
    ClassFit fit = fit_class(c, pts, gpu, out.profile, start);
    double sq = 0, abs_sum = 0, worst = 0;
    const KernelPredictor predictor(gpu, out.profile);
    for (const Measurement* m : pts) {
      const double pred = *predictor.seconds(m->c);
      const double rel = pred / m->seconds - 1.0;
      out.residuals.push_back({m, pred, rel});
      sq += rel * rel;
      abs_sum += std::abs(rel);
      worst = std::max(worst, std::abs(rel));
    }
    const auto n = static_cast<double>(pts.size());
    fit.rms_rel = std::sqrt(sq / n);
    fit.mape = abs_sum / n;
    fit.max_rel = worst;
    out.profile.of(c).source = fmt::format("{}: {} train points, rms relative residual {:.2f}%",
                                           provenance, pts.size(), fit.rms_rel * 100);
    out.classes.push_back(std::move(fit));
  }
  const bool curves =
      by_class.count(OpClass::kAttentionFlash) || by_class.count(OpClass::kAttentionDecode);
  if (curves) out.profile.curves_source = provenance + " (flash and decode curves where measured)";
  return out;
}

}  // namespace kvsim::validate
