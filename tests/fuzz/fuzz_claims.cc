// libFuzzer target: the plausibility claims CSV (models/latency/plausibility.h) through
// parse_claims, then every accepted claim through check_claim (the arithmetic behind the
// verdict must not trap on any value the parser lets through).
#include <cstddef>
#include <cstdint>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/latency/plausibility.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  static const Catalog& catalog = Catalog::builtin();
  try {
    for (const Claim& c : parse_claims(fuzz::as_text(data, size), "fuzz-claims.csv", catalog)) {
      (void)check_claim(c, catalog);
    }
  } catch (const InputError&) {
  }
  return 0;
}
