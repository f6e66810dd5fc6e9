#include "workloads/traces/trace_formats.h"

#include <algorithm>
#include <initializer_list>

#include "workloads/traces/field_parse.h"

namespace kvsim {

namespace {

using trace_detail::trim;

// Case-insensitive match of every name against the comma-separated header columns.
bool header_has(std::string_view header, std::initializer_list<std::string_view> names) {
  for (std::string_view want : names) {
    bool found = false;
    size_t pos = 0;
    while (!found && pos <= header.size()) {
      size_t comma = header.find(',', pos);
      if (comma == std::string_view::npos) comma = header.size();
      std::string_view col = trim(header.substr(pos, comma - pos));
      if (!col.empty() && col.front() == '"' && col.size() >= 2)
        col = col.substr(1, col.size() - 2);
      found = col.size() == want.size() &&
              std::equal(col.begin(), col.end(), want.begin(),
                         [](char a, char b) { return (a | 0x20) == (b | 0x20); });
      pos = comma + 1;
    }
    if (!found) return false;
  }
  return true;
}

bool is_json_record(std::string_view line) {
  line = trim(line);
  return !line.empty() && line.front() == '{';
}

// A CSV format: recognised by its three columns (a JSON record is never a CSV header).
TraceFormatRegistry::Entry csv_format(std::string name, std::string description, CsvLayout layout,
                                      std::string header, std::string sample, std::string bad_row) {
  TraceFormatFactory f;
  f.csv = true;
  f.header = std::move(header);
  f.sample = std::move(sample);
  f.bad_row = std::move(bad_row);
  f.recognises = [layout](std::string_view line) {
    return !is_json_record(line) &&
           header_has(trim(line), {layout.time, layout.prompt, layout.output});
  };
  f.open = [name, layout](std::unique_ptr<LineReader> lines, std::string first_line) {
    return make_csv_parser(name, layout, std::move(lines), std::move(first_line));
  };
  return {std::move(name),
          std::move(description),
          {layout.time, layout.prompt, layout.output},
          std::move(f)};
}

}  // namespace

void register_trace_formats(TraceFormatRegistry& r) {
  r.add(csv_format("normalized", "kvsim's own CSV: arrival seconds and token counts",
                   {"arrival_s", "prompt_tokens", "output_tokens", false, true},
                   "arrival_s,prompt_tokens,output_tokens",
                   "arrival_s,prompt_tokens,output_tokens\n0.0,100,10\n0.5,200,20\n",
                   "1.0,abc,30\n"));
  r.add(csv_format("azure", "Azure LLM inference traces (2023/2024)",
                   {"TIMESTAMP", "ContextTokens", "GeneratedTokens", true},
                   "TIMESTAMP,ContextTokens,GeneratedTokens",
                   "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,100,10\n"
                   "2023-11-16 18:17:04.0000000,200,20\n",
                   "yesterday,300,30\n"));
  {
    TraceFormatFactory f;
    f.csv = false;
    f.header = "a Mooncake JSON record";
    f.sample =
        "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 10, \"hash_ids\": [1, 2]}\n"
        "{\"timestamp\": 500, \"input_length\": 100, \"output_length\": 20, \"hash_ids\": [1]}\n";
    f.bad_row = "{\"timestamp\": 900, \"input_length\": \"many\", \"output_length\": 5}\n";
    f.recognises = is_json_record;
    f.prefix_hashes = true;
    f.open = make_mooncake_parser;
    r.add({"mooncake",
           "Mooncake's JSONL traces (ms timestamps, prefix-block hash_ids)",
           {"timestamp", "input_length", "output_length", "hash_ids"},
           std::move(f)});
  }
  r.add(csv_format("burstgpt", "BurstGPT's CSV (extra columns ignored)",
                   {"Timestamp", "Request tokens", "Response tokens", false},
                   "Timestamp,...,Request tokens,Response tokens,...",
                   "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                   "0,ChatGPT,100,10,110,Conversation log\n1,GPT-4,200,20,220,Conversation log\n",
                   "2,ChatGPT,-5,10,5,Conversation log\n"));
  r.add(csv_format("vidur", "Vidur's trace-replay CSV",
                   {"arrived_at", "num_prefill_tokens", "num_decode_tokens", false},
                   "arrived_at,num_prefill_tokens,num_decode_tokens",
                   "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,10\n0.25,200,20\n",
                   "0.5,100\n"));
}

const TraceFormatRegistry& trace_format_registry() {
  static const TraceFormatRegistry registry =
      TraceFormatRegistry::filled("trace format", register_trace_formats);
  return registry;
}

const TraceFormatRegistry::Entry* recognise_trace_format(std::string_view first_line) {
  for (const auto& e : trace_format_registry().entries()) {
    if (e.make.recognises(first_line)) return &e;
  }
  return nullptr;
}

std::vector<std::string> trace_format_choices() {
  std::vector<std::string> out{"auto"};
  for (const auto& name : trace_format_registry().names()) out.push_back(name);
  return out;
}

}  // namespace kvsim
