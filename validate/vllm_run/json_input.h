// The JSON `kvsim-validate vllm-run` reads (meta.json, requests.jsonl lines, a vllm bench serve
// result): parsed with a nesting bound and every parser error at its line:col, and values
// described, never dumped, in messages. A 100,000-deep list would otherwise overflow the stack
// when a message dumps it, and a 10 MB string would become a 10 MB message line.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace kvsim::validate {

// Deeper than any file vLLM writes (meta.json's resolved_config nests about 5 levels); what
// kvsim's YAML reader allows (core/config_node.cc).
constexpr int kMaxJsonDepth = 64;

// "line:col" (1-based) of byte offset `at` of `text`.
std::string json_line_col(const std::string& text, size_t at);

// The document in `text`, or an InputError "WHERE:LINE:COL: ..." naming where the parse
// stopped: a syntax error, a number out of range (1e400) or nesting deeper than kMaxJsonDepth.
// `line` > 0: `text` is that line of a JSON-lines file (the column is counted within it).
nlohmann::json parse_json_input(const std::string& text, const std::string& where, int line = 0);

// What a value is, for "got ..." in a message: a scalar as written (a string cut and escaped),
// a list or an object by its kind and size (models/hf_json.h, hf_describe).
std::string describe_json(const nlohmann::json& v);

}  // namespace kvsim::validate
