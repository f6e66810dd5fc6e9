// Checks on a rendered figure shared by the plot tests: its PNG size and that it is not blank.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "tests/test_skip.h"

namespace kvsim::test {

struct PngSize {
  uint32_t width = 0, height = 0;
};

// Width and height from the PNG's IHDR chunk; zero when the bytes are not a PNG.
inline PngSize png_size(const std::string& bytes) {
  static const std::string kMagic = "\x89PNG\r\n\x1a\n";
  if (bytes.size() < 24 || bytes.compare(0, 8, kMagic) != 0 || bytes.compare(12, 4, "IHDR") != 0) {
    return {};
  }
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

// Pixel standard deviation over all channels, read back through matplotlib: a blank or
// single-colour figure has (almost) none.
inline bool not_blank(const std::string& png) {
  const std::string cmd =
      "/usr/bin/python3 -c \"import sys, matplotlib.image as m; "
      "sys.exit(0 if m.imread(sys.argv[1]).std() > 0.05 else 1)\" '" +
      png + "'";
  return std::system(cmd.c_str()) == 0;
}

// Whether /usr/bin/python3 has matplotlib (the figure tests skip, with a message, when not).
inline bool have_matplotlib() {
  static const bool ok =
      std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0;
  return ok;
}

// Why the heavier figure tests skip under ASan (KVSIM_SKIP_UNDER_SANITIZER, tests/sanitizer.h).
inline constexpr const char* kFigureTimeIsPythons =
    "its time is matplotlib's and Chromium's, not kvsim's; the Release stage runs it, and "
    "'plot renders a run's memory, outcome and latency figures' keeps kvsim's plot data under "
    "ASan";

}  // namespace kvsim::test

// Skips the test (shown as Skipped by ctest, tests/test_skip.h) without matplotlib.
#define REQUIRE_MATPLOTLIB()                                                                    \
  if (!kvsim::test::have_matplotlib()) {                                                        \
    KVSIM_TEST_SKIP("plot",                                                                     \
                    "/usr/bin/python3 has no matplotlib (apt-get install python3-matplotlib)"); \
  }
