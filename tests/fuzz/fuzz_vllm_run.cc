// libFuzzer target: one input of `kvsim-validate vllm-run` or `import llmservingsim`
// (KVSIM_FUZZ_VLLM_INPUT): "meta" (a meta.json through read_vllm_meta), "requests" (a
// requests.jsonl beside a fixed meta.json, read as a run folder), "bench" (a vllm bench serve
// result with no meta.json beside it) or "bundle_csv" (an LLMServingSim CSV, every cell read as
// a number). Only InputError may escape the readers; anything else is a bug.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/errors.h"
#include "tests/fuzz/fuzz_util.h"
#include "validate/vllm_run/llmservingsim_bundle.h"
#include "validate/vllm_run/measured_run.h"

#ifndef KVSIM_FUZZ_VLLM_INPUT
#error "KVSIM_FUZZ_VLLM_INPUT names the input this target reads"
#endif

namespace {

// One scratch folder per fuzzing process, holding the input under the name its reader expects.
const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = kvsim::fuzz::scratch_path("kvsim-fuzz-vllm");
    std::filesystem::create_directories(d);
    // A valid meta.json for the requests.jsonl target (the others do not read it).
    if (std::string(KVSIM_FUZZ_VLLM_INPUT) == "requests") {
      kvsim::fuzz::write_scratch((d / "meta.json").string(),
                                 R"({"model": "meta-llama/Llama-3.1-8B",
"engine_kwargs": {"max_num_seqs": 4, "max_model_len": 4096}})");
    }
    return d;
  }();
  return dir;
}

void read_input(const std::string& kind, const std::filesystem::path& dir) {
  using namespace kvsim::validate;
  if (kind == "meta") {
    (void)read_vllm_meta(dir / "meta.json");
  } else if (kind == "requests") {
    const MeasuredRun run = read_measured_run(dir);
    for (const MeasuredRequest& r : run.requests) {
      // The reader's promises: positive lengths, latencies that are numbers and not negative.
      if (r.input_tokens < 1 || r.output_tokens < 1 || !(r.ttft_s >= 0) || !(r.e2e_s >= r.ttft_s)) {
        __builtin_trap();
      }
    }
  } else if (kind == "bench") {
    const MeasuredRun run = read_measured_run(dir / "bench.json");
    for (const MeasuredRequest& r : run.requests) {
      if (r.input_tokens < 1 || r.output_tokens < 1 || !(r.ttft_s >= 0) || !(r.e2e_s >= r.ttft_s) ||
          !std::isfinite(r.e2e_s)) {
        __builtin_trap();
      }
    }
  } else {
    const BundleCsv csv = read_bundle_csv(dir / "dense.csv");
    for (size_t i = 0; i < csv.rows.size(); ++i) {
      for (size_t c = 0; c < csv.header.size(); ++c) {
        try {
          (void)csv.num(i, c);
        } catch (const kvsim::InputError&) {
        }
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string kind = KVSIM_FUZZ_VLLM_INPUT;
  const std::filesystem::path& dir = scratch_dir();
  const char* name = kind == "meta"       ? "meta.json"
                     : kind == "requests" ? "requests.jsonl"
                     : kind == "bench"    ? "bench.json"
                                          : "dense.csv";
  kvsim::fuzz::write_scratch((dir / name).string(), kvsim::fuzz::as_text(data, size));
  try {
    read_input(kind, dir);
  } catch (const kvsim::InputError&) {
  }
  return 0;
}
