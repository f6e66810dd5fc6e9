// The sampler's fit (validate/vllm_run/sampler_fit.h): points that follow the two-slope form
// exactly give its coefficients back; too few points past the knee, or a negative slope past it,
// give the plain line; a profile written with the slope past L2 reads back with it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "models/catalog.h"
#include "models/latency/profile.h"
#include "validate/vllm_run/sampler_fit.h"

using namespace kvsim;
using namespace kvsim::validate;

namespace {
// 20 + 0.5 n + 1.5 max(0, n - 10) microseconds: 20.5 at 1, 24.5 at 9, 29 at 12, 65 at 30.
std::vector<std::pair<double, double>> sampler_fit_points(std::vector<double> ns) {
  std::vector<std::pair<double, double>> p;
  for (double n : ns) p.emplace_back(n, 20 + 0.5 * n + 1.5 * std::max(0.0, n - 10));
  return p;
}
}  // namespace

TEST_CASE("fit_sampler: two slopes, the knee where the logits outgrow L2", "[vllm_run][sampler]") {
  const SamplerFit f = fit_sampler(sampler_fit_points({1, 5, 9, 12, 20, 30}), 10);
  CHECK(f.constant_us == Approx(20));
  CHECK(f.per_sequence_us == Approx(0.5));
  CHECK(f.past_l2_us == Approx(1.5));
  CHECK(f.l2_sequences == 10);
  CHECK(f.us(1) == Approx(20.5));
  CHECK(f.us(30) == Approx(65));  // 20 + 15 + 1.5 x 20
}

TEST_CASE("fit_sampler: the plain line without two points past the knee", "[vllm_run][sampler]") {
  // With the knee at 100 no point is past it: the line, exact for n = 1, 5, 9 (20.5, 22.5,
  // 24.5). With the knee at 10 only n = 12 (29 us) is past it: still the line, steeper.
  const SamplerFit line = fit_sampler(sampler_fit_points({1, 5, 9}), 100);
  CHECK(line.constant_us == Approx(20));
  CHECK(line.per_sequence_us == Approx(0.5));
  CHECK(line.past_l2_us == 0);
  const SamplerFit one_past = fit_sampler(sampler_fit_points({1, 5, 9, 12}), 10);
  CHECK(one_past.past_l2_us == 0);
  CHECK(one_past.per_sequence_us > 0.5);  // the line bends up to reach 29 at 12
  // A time that falls past the knee is not a slower L2 path: the line.
  const SamplerFit falling = fit_sampler({{1, 20}, {5, 22}, {20, 25}, {30, 24}}, 10);
  CHECK(falling.past_l2_us == 0);
  // Zero times carry no relative error and are left out; under two points nothing is fitted.
  const SamplerFit none = fit_sampler({{1, 0}, {5, 22}}, 10);
  CHECK(none.constant_us == 0);
  CHECK(none.per_sequence_us == 0);
}

TEST_CASE("per_sequence_past_l2_us reads and writes; absent it stays 0", "[vllm_run][sampler]") {
  Profile p = default_profile(Catalog::builtin().gpu("rtx-pro-6000"));
  CHECK(write_profile_yaml(p).find("per_sequence_past_l2_us") == std::string::npos);
  p.per_sequence_overhead_s = 0.25e-6;
  p.per_sequence_past_l2_s = 0.75e-6;
  const Profile back = parse_profile(write_profile_yaml(p), "test");
  CHECK(back.per_sequence_overhead_s == Approx(0.25e-6));
  CHECK(back.per_sequence_past_l2_s == Approx(0.75e-6));
}
