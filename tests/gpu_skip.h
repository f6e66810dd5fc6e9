// [gpu] tests skip visibly: gpu_available_or_skip() is true when a CUDA device can run the test;
// otherwise it prints "gpu test skipped: <why>" and the test returns at once. ctest marks every
// test whose output holds that phrase as Skipped (SKIP_REGULAR_EXPRESSION, set for every suite by
// kvsim_test_suite() in tests/CMakeLists.txt), so a machine without a device lists the [gpu]
// tests as skipped, never as passed; with a device they run for real and print nothing here.
#pragma once

#include <iostream>
#include <string>

#ifdef KVSIM_HAVE_CUDA
#include "kernels/cuda_api.h"
#endif

namespace kvsim::test {

// The phrase ctest looks for; tests/CMakeLists.txt spells the same text.
inline constexpr const char* kGpuSkipPhrase = "gpu test skipped:";

// True when a CUDA device is there; otherwise prints the reason (once per test) and returns false.
inline bool gpu_available_or_skip() {
#ifdef KVSIM_HAVE_CUDA
  static const kernels::cuda::DeviceInfo info = kernels::cuda::probe_device();
  if (info.available) return true;
  const std::string why = "no CUDA device (" + info.why_not + ")";
#else
  const std::string why = "kvsim was built without CUDA (KVSIM_WITH_CUDA=OFF or no nvcc)";
#endif
  std::cout << kGpuSkipPhrase << " " << why << std::endl;
  return false;
}

}  // namespace kvsim::test
