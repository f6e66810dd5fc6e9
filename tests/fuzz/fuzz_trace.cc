// libFuzzer target: one trace format (KVSIM_FUZZ_TRACE_FORMAT, or "auto" for the detector)
// through open_trace on a scratch file, streamed to the end. Only InputError may escape the
// reader; anything else is a bug.
#include <cstddef>
#include <cstdint>

#include "core/errors.h"
#include "tests/fuzz/fuzz_util.h"
#include "workloads/traces/trace_reader.h"

#ifndef KVSIM_FUZZ_TRACE_FORMAT
#error "KVSIM_FUZZ_TRACE_FORMAT names the trace format this target reads"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  const std::string& path = fuzz::scratch_path("kvsim-fuzz-trace");
  fuzz::write_scratch(path, fuzz::as_text(data, size));
  // Alternate the bad-row policy on the first byte so both the throwing and the skipping paths
  // are covered from the same corpus.
  TraceOptions o;
  o.path = path;
  o.format = KVSIM_FUZZ_TRACE_FORMAT;
  o.on_bad_row = size > 0 && (data[0] & 1) ? BadRowPolicy::kSkip : BadRowPolicy::kError;
  try {
    auto source = open_trace(o);
    int64_t last_id = -1;
    SimTime last_arrival = 0;
    while (auto r = source->next()) {
      // The reader's promises: dense ids, sorted non-negative arrivals, positive token counts.
      if (r->id != last_id + 1 || r->arrival < last_arrival || r->prompt_tokens < 1 ||
          r->output_tokens < 1) {
        __builtin_trap();
      }
      last_id = r->id;
      last_arrival = r->arrival;
    }
  } catch (const InputError&) {
  }
  return 0;
}
