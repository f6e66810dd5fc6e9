// The trace format registry: `trace: {format: ...}` names one of its entries, and `format: auto`
// asks each entry, in registration order, whether it recognises the file's first line. An entry's
// keys are the columns (or JSON keys) it reads; it also carries a small sample file and a bad row
// for the contract suite (tests/contract/trace_format_contract_test.cc). Adding a format takes one
// add() in register_trace_formats() (trace_formats.cc) plus its RowParser.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/registry.h"
#include "workloads/traces/row_parser.h"

namespace kvsim {

struct TraceFormatFactory {
  bool csv = true;      // a CSV file with a header line (else one JSON record per line)
  std::string header;   // what it recognises, as messages show it ("arrival_s,prompt_tokens,...")
  std::string sample;   // a small valid file of this format (two or more rows)
  std::string bad_row;  // a malformed row: sample + bad_row fails on the row's line
  bool prefix_hashes = false;  // its rows carry prefix-block hashes (what prefix caching matches)
  // Whether `first_line` (trimmed, never blank) is this format's header or first record.
  std::function<bool(std::string_view first_line)> recognises;
  // The parser over `lines`, whose line 1 (`first_line`) was already read.
  std::function<std::unique_ptr<RowParser>(std::unique_ptr<LineReader> lines,
                                           std::string first_line)>
      open;
};

using TraceFormatRegistry = Registry<TraceFormatFactory>;

// Adds every format: normalized, azure, mooncake, burstgpt, vidur.
void register_trace_formats(TraceFormatRegistry& registry);
// The registry filled by register_trace_formats(), built on first use.
const TraceFormatRegistry& trace_format_registry();

// The first registered format that recognises `first_line`, or nullptr.
const TraceFormatRegistry::Entry* recognise_trace_format(std::string_view first_line);

// "auto" and every registered format name: the choices of `trace: {format: ...}`.
std::vector<std::string> trace_format_choices();

}  // namespace kvsim
