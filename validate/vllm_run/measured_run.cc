#include "validate/vllm_run/measured_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace kvsim::validate {

namespace {

using Json = nlohmann::json;

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read", p.string()));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// "line:col" (1-based) of byte offset `at` of `text`.
std::string line_col(const std::string& text, size_t at) {
  at = std::min(at, text.size());
  int line = 1;
  size_t start = 0;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      start = i + 1;
    }
  }
  return fmt::format("{}:{}", line, at - start + 1);
}

// Parses `text`; a syntax error names `where` and the line:col the parser stopped at (plus
// `line_offset` lines, for one line of a JSON-lines file).
Json parse_json(const std::string& text, const std::string& where) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    if (const size_t p = what.find("parse error"); p != std::string::npos) {
      const size_t colon = what.find(": ", p);
      what = colon == std::string::npos ? what.substr(p) : what.substr(colon + 2);
    }
    throw InputError(fmt::format("{}:{}: malformed JSON: {}", where,
                                 line_col(text, e.byte > 0 ? e.byte - 1 : 0), what));
  }
}

// Reads the keys of one JSON object, naming the file and the key's place in messages.
class Fields {
 public:
  Fields(const Json& j, const std::string& text, std::string where, int line = 0)
      : j_(j), text_(text), where_(std::move(where)), line_(line) {}

  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    if (line_ > 0) throw InputError(fmt::format("{}:{}: {}", where_, line_, msg));
    const size_t at = text_.find("\"" + key + "\"");
    throw InputError(fmt::format("{}:{}: {}", where_,
                                 line_col(text_, at == std::string::npos ? 0 : at), msg));
  }
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const Json& at(const std::string& key) const {
    if (!has(key)) fail(key, fmt::format("no '{}'", key));
    return j_.at(key);
  }
  double number(const std::string& key) const {
    const Json& v = at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      fail(key, fmt::format("'{}': expected a number, got {}", key, v.dump()));
    }
    return v.get<double>();
  }
  int64_t integer(const std::string& key, int64_t min, int64_t max) const {
    const Json& v = at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max) {
      fail(key, fmt::format("'{}': expected an integer in [{}, {}], got {}", key, min, max, v.dump()));
    }
    return v.get<int64_t>();
  }
  std::optional<int64_t> opt_integer(const std::string& key, int64_t min, int64_t max) const {
    if (!has(key)) return std::nullopt;
    return integer(key, min, max);
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const Json& v = j_.at(key);
    if (!v.is_string()) fail(key, fmt::format("'{}': expected a string, got {}", key, v.dump()));
    return v.get<std::string>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const Json& v = j_.at(key);
    if (!v.is_boolean()) fail(key, fmt::format("'{}': expected true or false, got {}", key, v.dump()));
    return v.get<bool>();
  }

 private:
  const Json& j_;
  const std::string& text_;
  std::string where_;
  int line_;
};

VllmEngineArgs engine_args(const Json& j, const std::string& text, const std::string& where,
                           const std::string& fallback_model) {
  const Fields f(j, text, where);
  VllmEngineArgs e;
  e.model = f.string("model", fallback_model);
  e.tensor_parallel = static_cast<int>(f.opt_integer("tensor_parallel_size", 1, 1024).value_or(1));
  e.data_parallel = static_cast<int>(f.opt_integer("data_parallel_size", 1, 1024).value_or(1));
  e.expert_parallel = f.boolean("enable_expert_parallel", false);
  e.max_num_seqs = f.opt_integer("max_num_seqs", 1, 1 << 20);
  e.max_num_batched_tokens = f.opt_integer("max_num_batched_tokens", 1, int64_t{1} << 30);
  e.max_model_len = f.opt_integer("max_model_len", 1, int64_t{1} << 32);
  e.num_gpu_blocks = f.opt_integer("num_gpu_blocks_override", 1, int64_t{1} << 40);
  if (!e.num_gpu_blocks) e.num_gpu_blocks = f.opt_integer("num_gpu_blocks", 1, int64_t{1} << 40);
  e.block_size = static_cast<int>(f.opt_integer("block_size", 1, 1 << 16).value_or(16));
  if (f.has("gpu_memory_utilization")) {
    e.gpu_memory_utilization = f.number("gpu_memory_utilization");
    if (!(e.gpu_memory_utilization > 0 && e.gpu_memory_utilization <= 1)) {
      f.fail("gpu_memory_utilization",
             fmt::format("'gpu_memory_utilization': expected a number in (0, 1], got {}",
                         e.gpu_memory_utilization));
    }
  }
  e.enable_prefix_caching = f.boolean("enable_prefix_caching", true);
  e.dtype = f.string("dtype", "auto");
  e.kv_cache_dtype = f.string("kv_cache_dtype", "auto");
  e.seed = static_cast<uint64_t>(f.opt_integer("seed", 0, int64_t{1} << 62).value_or(0));
  return e;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == '\n') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

void sort_by_arrival(std::vector<MeasuredRequest>& rs) {
  std::stable_sort(rs.begin(), rs.end(), [](const MeasuredRequest& a, const MeasuredRequest& b) {
    return a.arrival_s < b.arrival_s;
  });
}

MeasuredRun read_run_folder(const std::filesystem::path& dir) {
  MeasuredRun run;
  run.format = "vllm-run";
  run.source = dir;
  const auto meta = dir / "meta.json";
  if (!std::filesystem::is_regular_file(meta)) {
    throw InputError(fmt::format("{}: no meta.json (a vLLM run folder holds meta.json and "
                                 "requests.jsonl)", dir.string()));
  }
  run.engine = read_vllm_meta(meta);
  run.engine_from_meta = true;
  const auto reqs = dir / "requests.jsonl";
  if (!std::filesystem::is_regular_file(reqs)) {
    throw InputError(fmt::format("{}: no requests.jsonl", dir.string()));
  }
  const std::string text = read_text(reqs);
  const std::vector<std::string> lines = split_lines(text);
  struct Raw {
    MeasuredRequest r;
    double queued, first, last;
  };
  std::vector<Raw> raw;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t") == std::string::npos) continue;
    const int line = static_cast<int>(i + 1);
    const std::string where = reqs.string();
    Json j;
    try {
      j = Json::parse(lines[i]);
    } catch (const Json::parse_error& e) {
      throw InputError(fmt::format("{}:{}:{}: malformed JSON line", where, line,
                                   e.byte > 0 ? e.byte : 1));
    }
    if (!j.is_object()) throw InputError(fmt::format("{}:{}: expected a JSON object", where, line));
    const Fields f(j, lines[i], where, line);
    Raw w;
    w.r.id = j.contains("request_id") && j["request_id"].is_string()
                 ? j["request_id"].get<std::string>()
                 : fmt::format("line-{}", line);
    w.r.input_tokens = f.integer("input_toks", 1, int64_t{1} << 32);
    w.r.output_tokens = f.integer("output_toks", 1, int64_t{1} << 32);
    w.queued = f.number("queued_ts");
    w.first = f.number("first_token_ts");
    w.last = f.number("last_token_ts");
    if (!(w.first >= w.queued && w.last >= w.first)) {
      throw InputError(fmt::format("{}:{}: timestamps out of order (queued_ts {} <= "
                                   "first_token_ts {} <= last_token_ts {} expected)",
                                   where, line, w.queued, w.first, w.last));
    }
    raw.push_back(w);
  }
  if (raw.empty()) throw InputError(fmt::format("{}: no requests", reqs.string()));
  double t0 = raw.front().queued;
  for (const Raw& w : raw) t0 = std::min(t0, w.queued);
  for (Raw& w : raw) {
    // The server's own clock (monotonic): TTFT, TPOT and E2E as the run's README defines them.
    w.r.arrival_s = w.queued - t0;
    w.r.ttft_s = w.first - w.queued;
    w.r.e2e_s = w.last - w.queued;
    if (w.r.output_tokens > 1) {
      w.r.tpot_s = (w.last - w.first) / static_cast<double>(w.r.output_tokens - 1);
    }
    run.requests.push_back(w.r);
  }
  sort_by_arrival(run.requests);
  if (std::filesystem::is_regular_file(dir / "timeseries.csv")) run.timeseries = dir / "timeseries.csv";
  return run;
}

MeasuredRun read_bench_serve(const std::filesystem::path& file) {
  MeasuredRun run;
  run.format = "vllm-bench-serve";
  run.source = file;
  const std::string text = read_text(file);
  const Json j = parse_json(text, file.string());
  if (!j.is_object()) {
    throw InputError(fmt::format("{}:1:1: expected a vllm bench serve result object", file.string()));
  }
  const Fields f(j, text, file.string());
  for (const char* key : {"input_lens", "output_lens", "ttfts", "itls", "start_times"}) {
    if (!f.has(key) || !j[key].is_array()) {
      f.fail(key, fmt::format("no '{}' list: save the result with vllm bench serve --save-result "
                              "--save-detailed (per-request input_lens, output_lens, ttfts, itls, "
                              "start_times)", key));
    }
  }
  const size_t n = j["input_lens"].size();
  for (const char* key : {"output_lens", "ttfts", "itls", "start_times"}) {
    if (j[key].size() != n) {
      f.fail(key, fmt::format("'{}' has {} entries, input_lens {}", key, j[key].size(), n));
    }
  }
  const auto meta = file.parent_path() / "meta.json";
  if (std::filesystem::is_regular_file(meta)) {
    run.engine = read_vllm_meta(meta);
    run.engine_from_meta = true;
  } else {
    run.engine.model = f.string("model_id", "");
  }
  const bool has_errors = j.contains("errors") && j["errors"].is_array() && j["errors"].size() == n;
  auto num_at = [&](const char* key, size_t i) {
    const Json& v = j[key][i];
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      f.fail(key, fmt::format("'{}'[{}]: expected a number, got {}", key, i, v.dump()));
    }
    return v.get<double>();
  };
  double t0 = 0;
  bool first = true;
  for (size_t i = 0; i < n; ++i) {
    if (has_errors && j["errors"][i].is_string() && !j["errors"][i].get<std::string>().empty()) {
      ++run.skipped_failed;
      continue;
    }
    MeasuredRequest r;
    r.id = fmt::format("{}", i);
    r.input_tokens = static_cast<int64_t>(num_at("input_lens", i));
    r.output_tokens = static_cast<int64_t>(num_at("output_lens", i));
    if (r.input_tokens < 1 || r.output_tokens < 1) {
      ++run.skipped_failed;  // a failed request: no tokens came back
      continue;
    }
    const double start = num_at("start_times", i);
    r.ttft_s = num_at("ttfts", i);
    const Json& itl = j["itls"][i];
    if (!itl.is_array()) f.fail("itls", fmt::format("'itls'[{}]: expected a list of seconds", i));
    double decode = 0;
    for (const Json& v : itl) {
      if (!v.is_number()) f.fail("itls", fmt::format("'itls'[{}]: expected numbers", i));
      decode += v.get<double>();
    }
    // vllm/benchmarks/serve.py: latency = ttft + sum(itl); tpot = (latency - ttft) / (output - 1).
    r.e2e_s = r.ttft_s + decode;
    if (r.output_tokens > 1) r.tpot_s = decode / static_cast<double>(r.output_tokens - 1);
    r.arrival_s = start;
    if (first || start < t0) t0 = start;
    first = false;
    run.requests.push_back(r);
  }
  if (run.requests.empty()) throw InputError(fmt::format("{}: no successful requests", file.string()));
  for (MeasuredRequest& r : run.requests) r.arrival_s -= t0;
  sort_by_arrival(run.requests);
  return run;
}

}  // namespace

VllmEngineArgs read_vllm_meta(const std::filesystem::path& meta_json) {
  const std::string text = read_text(meta_json);
  const Json j = parse_json(text, meta_json.string());
  if (!j.is_object()) throw InputError(fmt::format("{}:1:1: expected a JSON object", meta_json.string()));
  const std::string model = j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : "";
  VllmEngineArgs e = j.contains("engine_kwargs") && j["engine_kwargs"].is_object()
                         ? engine_args(j["engine_kwargs"], text, meta_json.string(), model)
                         : engine_args(j, text, meta_json.string(), model);
  if (j.contains("vllm_version") && j["vllm_version"].is_string()) {
    e.vllm_version = j["vllm_version"].get<std::string>();
  }
  if (e.model.empty()) {
    throw InputError(fmt::format("{}:1:1: no 'model' (the Hugging Face name of the served model)",
                                 meta_json.string()));
  }
  return e;
}

MeasuredRun read_measured_run(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return read_run_folder(path);
  if (std::filesystem::is_regular_file(path, ec)) return read_bench_serve(path);
  throw InputError(fmt::format("{}: no such run folder or vllm bench serve result file", path.string()));
}

}  // namespace kvsim::validate
