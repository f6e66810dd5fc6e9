// Trace readers: one entry point that opens a published LLM-serving trace and streams it as
// RequestSpecs, reading the file incrementally (a million-row trace is never held whole).
//
// Formats (detected from the header / first line when `format` is "auto"):
//   normalized  CSV  arrival_s,prompt_tokens,output_tokens          (seconds, float)
//   azure       CSV  TIMESTAMP,ContextTokens,GeneratedTokens         ("2023-11-16
//   18:17:03.9799600") mooncake    JSONL {"timestamp": ms, "input_length", "output_length",
//   "hash_ids": [...]} burstgpt    CSV  Timestamp,Model,Request tokens,Response tokens,Total
//   tokens,Log Type vidur       CSV  arrived_at,num_prefill_tokens,num_decode_tokens (seconds,
//   float)
// CSV columns are found by name, so extra columns and other orders are accepted.
//
// Time: the replay's t=0 is the trace's first row (every format is made relative to it), shifted
// by the window start; arrival = (trace_time - window_start) / time_scale.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "workloads/request_spec.h"

namespace kvsim {

class ConfigNode;

enum class BadRowPolicy { kError, kSkip };

// What a reader did, readable while and after it streams (shared with the source it built).
struct TraceCounters {
  int64_t rows_read = 0;         // data rows seen (the header excluded), good or bad
  int64_t requests = 0;          // requests handed out
  int64_t skipped_bad_rows = 0;  // malformed rows dropped under on_bad_row: skip
  int64_t outside_window = 0;    // good rows before the window start
  int64_t clipped_prompt = 0;    // requests whose prompt was cut to max_prompt_tokens
  int64_t clipped_output = 0;    // requests whose output was cut to max_output_tokens
  std::string first_skipped;     // the error message of the first skipped row, for the log
};

struct TraceOptions {
  std::string path;
  // "auto", "normalized", "azure", "mooncake", "burstgpt" or "vidur".
  std::string format = "auto";
  // Keep rows whose trace time t (seconds since the first row) has window_start_s <= t <
  // window_end_s. Rows past the end stop the reading.
  double window_start_s = 0.0;
  std::optional<double> window_end_s;
  double time_scale = 1.0;              // replay k times faster: arrival = t / k. Requires: > 0.
  std::optional<int64_t> max_requests;  // stop after this many requests
  std::optional<int64_t> max_prompt_tokens;  // clip longer prompts to this (counted)
  std::optional<int64_t> max_output_tokens;  // clip longer outputs to this (counted)
  BadRowPolicy on_bad_row = BadRowPolicy::kError;
  // Filled by the reader; copies of these options share it.
  std::shared_ptr<TraceCounters> counters = std::make_shared<TraceCounters>();
};

// Opens the trace and checks its header; rows are read lazily by next(). Throws InputError when
// the file is missing, empty, binary or has an unrecognised header. next() throws InputError
// "FILE:LINE: <what was expected>, got '<content>'" for a malformed row (unless on_bad_row is
// kSkip), for decreasing timestamps, zero token counts and a truncated last line.
// Requests come with dense ids from 0 in arrival order and client = -1.
std::unique_ptr<WorkloadSource> open_trace(const TraceOptions& options);

// Reads a scenario's `trace:` node: {path, format, window_s: [a, b], time_scale, max_requests,
// max_prompt_tokens, max_output_tokens, on_bad_row: error|skip}. A relative path is resolved
// against the folder of the scenario file (node.source()). Throws ConfigError with file:line:col.
TraceOptions parse_trace_options(const ConfigNode& node);

// The format named by the file's first line: "normalized", "azure", ... Throws InputError when
// no format matches. Reads only the first line.
std::string detect_trace_format(const std::string& path);

}  // namespace kvsim
