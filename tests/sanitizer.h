// Whether this test binary runs under AddressSanitizer (gcc defines __SANITIZE_ADDRESS__, clang
// answers __has_feature). RSS checks mean nothing there: ASan's redzones, quarantine and shadow
// memory grow RSS by design.
#pragma once

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
