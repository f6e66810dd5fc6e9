// Whether this test binary runs under AddressSanitizer (gcc defines __SANITIZE_ADDRESS__, clang
// answers __has_feature). RSS checks mean nothing there: ASan's redzones, quarantine and shadow
// memory grow RSS by design.
#pragma once

#include "tests/test_skip.h"

namespace kvsim::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace kvsim::test

// Skips, visibly (ctest: Skipped), a test that the sanitizer stage gains nothing from: one whose
// time is another program's (matplotlib, Chromium) or a repeat of what the Release stage runs in
// full, so that CI's two stages fit its time. `why` says which.
#define KVSIM_SKIP_UNDER_SANITIZER(why)                                     \
  if (::kvsim::test::kAddressSanitizer) {                                   \
    KVSIM_TEST_SKIP("sanitizer", std::string("under ASan only: ") + (why)); \
  }
