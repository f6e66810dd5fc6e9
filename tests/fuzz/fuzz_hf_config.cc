// libFuzzer target: a Hugging Face config.json through parse_hf_config, and an accepted model
// through the arithmetic every command runs on it (parameters, weights, KV bytes per token). A
// clean InputError is the only acceptable failure; any other exception (nlohmann's own
// included), a sanitizer report, a stack overflow or a hang is a bug. A message must stay one
// short line whatever the input: it echoes only what it cuts.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/errors.h"
#include "models/hf_config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  try {
    const ModelSpec m = parse_hf_config(std::string(fuzz::as_text(data, size)), "fuzz.json");
    (void)m.param_count();
    (void)m.weights_bytes();
    (void)m.kv_bytes_per_token();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    if (msg.find('\n') != std::string::npos || msg.size() > 1000) __builtin_trap();
  }
  return 0;
}
