// libFuzzer target: a calibrated latency profile (models/latency/profile.h) through
// parse_profile, then written back and re-read: what the parser accepts must round-trip.
#include <cstddef>
#include <cstdint>

#include "core/errors.h"
#include "models/latency/profile.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  Profile p;
  try {
    p = parse_profile(fuzz::as_text(data, size), "fuzz-profile.yaml");
  } catch (const InputError&) {
    return 0;
  }
  // An accepted profile must survive its own writer: a rejection here is a writer/reader bug.
  (void)parse_profile(write_profile_yaml(p), "fuzz-profile-roundtrip.yaml");
  return 0;
}
