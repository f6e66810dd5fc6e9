#include "validate/vllm_run/measured_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "validate/vllm_run/engine_kwargs.h"
#include "validate/vllm_run/json_fields.h"
#include "validate/vllm_run/json_input.h"

namespace kvsim::validate {

namespace {

using Json = nlohmann::json;
using Fields = JsonFields;

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read", p.string()));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// vLLM refuses a prompt longer than max_model_len (vllm/v1/engine/processor.py,
// Processor._validate_model_input), so such a request cannot be in a measured run; kvsim would
// count it too long and compare the errors over a different set of requests.
void check_model_len(const VllmEngineArgs& e, int64_t input_tokens, const std::string& where) {
  if (e.max_model_len && input_tokens > *e.max_model_len) {
    throw InputError(
        fmt::format("{}: {} prompt tokens, above the run's max_model_len {} (vLLM "
                    "refuses such a prompt)",
                    where, input_tokens, *e.max_model_len));
  }
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
    throw InputError(
        fmt::format("{}: no meta.json (a vLLM run folder holds meta.json and "
                    "requests.jsonl)",
                    dir.string()));
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
    const Json j = parse_json_input(lines[i], where, line);
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
      throw InputError(
          fmt::format("{}:{}: timestamps out of order (queued_ts {} <= "
                      "first_token_ts {} <= last_token_ts {} expected)",
                      where, line, w.queued, w.first, w.last));
    }
    check_model_len(run.engine, w.r.input_tokens, fmt::format("{}:{}", where, line));
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
  if (std::filesystem::is_regular_file(dir / "timeseries.csv"))
    run.timeseries = dir / "timeseries.csv";
  return run;
}

MeasuredRun read_bench_serve(const std::filesystem::path& file) {
  MeasuredRun run;
  run.format = "vllm-bench-serve";
  run.source = file;
  const std::string text = read_text(file);
  const Json j = parse_json_input(text, file.string());
  if (!j.is_object()) {
    throw InputError(
        fmt::format("{}:1:1: expected a vllm bench serve result object", file.string()));
  }
  const Fields f(j, text, file.string());
  for (const char* key : {"input_lens", "output_lens", "ttfts", "itls", "start_times"}) {
    if (!f.has(key) || !j[key].is_array()) {
      f.fail(key, fmt::format("no '{}' list: save the result with vllm bench serve --save-result "
                              "--save-detailed (per-request input_lens, output_lens, ttfts, itls, "
                              "start_times)",
                              key));
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
  // Each value at its list's key, with its index: a finite number, at least 0 for the
  // latencies, and whole token counts (vllm/benchmarks/serve.py writes ints).
  auto num_at = [&](const char* key, size_t i, double min) {
    const Json& v = j[key][i];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < min) {
      f.fail(key, fmt::format("'{}'[{}]: expected a number >= {}, got {}", key, i, min,
                              describe_json(v)));
    }
    return v.get<double>();
  };
  auto count_at = [&](const char* key, size_t i) {
    const Json& v = j[key][i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t{1} << 32) ||
        (v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t{1} << 32))) {
      f.fail(key, fmt::format("'{}'[{}]: expected a token count (an integer in [0, 2^32]), got {}",
                              key, i, describe_json(v)));
    }
    return v.get<int64_t>();
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
    r.input_tokens = count_at("input_lens", i);
    r.output_tokens = count_at("output_lens", i);
    if (r.input_tokens < 1 || r.output_tokens < 1) {
      ++run.skipped_failed;  // a failed request: no tokens came back
      continue;
    }
    check_model_len(run.engine, r.input_tokens,
                    f.place("input_lens") + fmt::format(": 'input_lens'[{}]", i));
    const double start = num_at("start_times", i, -1e300);
    r.ttft_s = num_at("ttfts", i, 0);
    const Json& itl = j["itls"][i];
    if (!itl.is_array()) f.fail("itls", fmt::format("'itls'[{}]: expected a list of seconds", i));
    // One gap between each two streamed chunks: at most output_len - 1 (fewer when a chunk
    // carries several tokens).
    if (static_cast<int64_t>(itl.size()) > r.output_tokens - 1) {
      f.fail("itls",
             fmt::format("'itls'[{}]: {} inter-token gaps for {} output tokens (at most {})", i,
                         itl.size(), r.output_tokens, r.output_tokens - 1));
    }
    double decode = 0;
    for (const Json& v : itl) {
      if (!v.is_number() || !(v.get<double>() >= 0)) {
        f.fail("itls",
               fmt::format("'itls'[{}]: expected seconds >= 0, got {}", i, describe_json(v)));
      }
      decode += v.get<double>();
    }
    // vllm/benchmarks/serve.py: latency = ttft + sum(itl); tpot = (latency - ttft) / (output - 1).
    r.e2e_s = r.ttft_s + decode;
    if (!std::isfinite(r.e2e_s)) {
      f.fail("itls",
             fmt::format("'itls'[{}]: TTFT plus the gaps is not a finite number of seconds", i));
    }
    if (r.output_tokens > 1) r.tpot_s = decode / static_cast<double>(r.output_tokens - 1);
    r.arrival_s = start;
    if (first || start < t0) t0 = start;
    first = false;
    run.requests.push_back(r);
  }
  if (run.requests.empty())
    throw InputError(fmt::format("{}: no successful requests", file.string()));
  for (MeasuredRequest& r : run.requests) r.arrival_s -= t0;
  sort_by_arrival(run.requests);
  return run;
}

}  // namespace

VllmEngineArgs read_vllm_meta(const std::filesystem::path& meta_json) {
  const std::string text = read_text(meta_json);
  const std::string where = meta_json.string();
  const Json j = parse_json_input(text, where);
  if (!j.is_object()) {
    throw InputError(
        fmt::format("{}:1:1: expected a JSON object, got {}", where, describe_json(j)));
  }
  const Fields top(j, text, where);
  const std::string model = top.string("model", "");
  VllmEngineArgs e;
  if (top.has("engine_kwargs")) {
    if (!j["engine_kwargs"].is_object()) {
      top.fail("engine_kwargs", fmt::format("'engine_kwargs': expected an object (vLLM's engine "
                                            "arguments), got {}",
                                            describe_json(j["engine_kwargs"])));
    }
    e = read_engine_kwargs(Fields(j["engine_kwargs"], text, where), model, /*strict=*/true);
  } else {
    e = read_engine_kwargs(top, model, /*strict=*/false);
  }
  e.vllm_version = top.string("vllm_version", "");
  if (e.model.empty()) {
    throw InputError(
        fmt::format("{}:1:1: no 'model' (the Hugging Face name of the served model)", where));
  }
  return e;
}

MeasuredRun read_measured_run(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return read_run_folder(path);
  if (std::filesystem::is_regular_file(path, ec)) return read_bench_serve(path);
  throw InputError(
      fmt::format("{}: no such run folder or vllm bench serve result file", path.string()));
}

}  // namespace kvsim::validate
