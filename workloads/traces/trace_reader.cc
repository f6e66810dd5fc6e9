#include "workloads/traces/trace_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "core/config_node.h"
#include "core/errors.h"
#include "workloads/traces/field_parse.h"
#include "workloads/traces/row_parser.h"
#include "workloads/traces/trace_formats.h"

namespace kvsim {

namespace {

using trace_detail::quote;
using trace_detail::trim;

using FormatEntry = TraceFormatRegistry::Entry;

const FormatEntry& format_from_name(const std::string& name) {
  if (const auto* e = trace_format_registry().find(name)) return *e;
  throw InputError(
      fmt::format("unknown trace format '{}', expected {}", name, or_list(trace_format_choices())));
}

// Line 1 of the file, skipping blank lines; throws on an empty file.
std::string first_line(LineReader& lines) {
  std::string_view line;
  do {
    if (!lines.next(line)) {
      throw InputError(
          fmt::format("{}: empty trace file, expected a header line or a JSON "
                      "record",
                      lines.path()));
    }
  } while (trim(line).empty());
  return std::string(line);
}

const FormatEntry& detect(const std::string& path, std::string_view line) {
  if (const auto* e = recognise_trace_format(line)) return *e;
  std::string csv, other;  // what each format recognises, from the registry
  for (const auto& e : trace_format_registry().entries()) {
    std::string& list = e.make.csv ? csv : other;
    if (e.make.csv) {
      list += fmt::format("{}{}: {}", list.empty() ? "" : "; ", e.name, e.make.header);
    } else {
      list += fmt::format("{}{}", list.empty() ? "" : " or ", e.make.header);
    }
  }
  throw InputError(fmt::format("{}:1: expected a trace header ({}) or {}, got '{}'", path, csv,
                               other, quote(line)));
}

class TraceSource final : public WorkloadSource {
 public:
  TraceSource(const TraceOptions& o, bool has_header, std::unique_ptr<RowParser> parser)
      : has_header_(has_header), options_(o), parser_(std::move(parser)), counters_(o.counters) {
    window_start_ns_ = seconds_to_sim(o.window_start_s);
    if (o.window_end_s) window_end_ns_ = seconds_to_sim(*o.window_end_s);
  }

  std::optional<RequestSpec> next() override {
    while (!done_) {
      if (options_.max_requests && counters_->requests >= *options_.max_requests) break;
      if (!read_row()) break;
      const SimTime t = row_.time_ns - origin_ns_;
      if (t < window_start_ns_) {
        ++counters_->outside_window;
        continue;
      }
      if (t >= window_end_ns_) break;
      return make_request(t - window_start_ns_);
    }
    done_ = true;
    return std::nullopt;
  }

 private:
  // Reads the next good row into row_; false at the end. Applies on_bad_row to malformed rows
  // and to rows whose time goes backwards.
  bool read_row() {
    while (true) {
      bool got = false;
      try {
        got = parser_->next(row_);
      } catch (const TraceRowError& e) {
        ++counters_->rows_read;
        skip_or_throw(e.what());
        continue;
      }
      if (!got) {
        if (counters_->rows_read == 0) {
          throw InputError(fmt::format("{}: trace has no rows{}", options_.path,
                                       has_header_ ? " after the header" : ""));
        }
        return false;
      }
      ++counters_->rows_read;
      if (have_prev_ && row_.time_ns < prev_time_ns_) {
        skip_or_throw(row_error(
            parser_->lines(),
            fmt::format("{}: expected a time >= the previous row's '{}' (timestamps must not "
                        "decrease)",
                        parser_->time_column(), prev_time_text_),
            row_.time_text));
        continue;
      }
      if (!have_prev_) origin_ns_ = row_.time_ns;
      have_prev_ = true;
      prev_time_ns_ = row_.time_ns;
      prev_time_text_.assign(row_.time_text);
      return true;
    }
  }

  void skip_or_throw(const std::string& message) {
    if (options_.on_bad_row == BadRowPolicy::kError) throw TraceRowError(message);
    if (counters_->skipped_bad_rows++ == 0) counters_->first_skipped = message;
  }

  RequestSpec make_request(SimTime since_window) {
    RequestSpec r;
    r.id = counters_->requests++;
    r.arrival = options_.time_scale == 1.0
                    ? since_window
                    : static_cast<SimTime>(
                          std::llround(static_cast<double>(since_window) / options_.time_scale));
    r.prompt_tokens = row_.prompt_tokens;
    r.output_tokens = row_.output_tokens;
    r.priority = row_.priority;
    r.max_queue_time = row_.max_queue_time;
    r.session_id = row_.session_id;
    r.acceptance_nano = row_.acceptance_nano;
    if (options_.max_prompt_tokens && r.prompt_tokens > *options_.max_prompt_tokens) {
      r.prompt_tokens = *options_.max_prompt_tokens;
      ++counters_->clipped_prompt;
    }
    if (options_.max_output_tokens && r.output_tokens > *options_.max_output_tokens) {
      r.output_tokens = *options_.max_output_tokens;
      ++counters_->clipped_output;
    }
    if (!row_.prefix_hashes.empty()) {
      // A clipped prompt keeps only the blocks it still covers.
      const int64_t b = row_.hash_block_tokens;
      const auto keep = static_cast<size_t>((r.prompt_tokens + b - 1) / b);
      if (row_.prefix_hashes.size() > keep) row_.prefix_hashes.resize(keep);
      r.prefix_hashes = std::move(row_.prefix_hashes);  // the parser refills it
      r.hash_block_tokens = b;
    }
    return r;
  }

 private:
  bool has_header_;
  TraceOptions options_;
  std::unique_ptr<RowParser> parser_;
  std::shared_ptr<TraceCounters> counters_;
  RawRow row_;
  SimTime window_start_ns_ = 0;
  SimTime window_end_ns_ = std::numeric_limits<SimTime>::max();
  SimTime origin_ns_ = 0;
  bool have_prev_ = false;
  SimTime prev_time_ns_ = 0;
  std::string prev_time_text_;
  bool done_ = false;
};

void check_options(const TraceOptions& o) {
  if (o.path.empty()) throw InputError("trace: empty path");
  if (!(o.time_scale > 0) || !std::isfinite(o.time_scale)) {
    throw InputError(fmt::format("{}: time_scale must be > 0, got {}", o.path, o.time_scale));
  }
  if (!(o.window_start_s >= 0) || (o.window_end_s && !(*o.window_end_s > o.window_start_s))) {
    throw InputError(fmt::format("{}: window must satisfy 0 <= start < end", o.path));
  }
  if (!o.counters) throw InputError(fmt::format("{}: trace options without counters", o.path));
}

}  // namespace

std::unique_ptr<WorkloadSource> open_trace(const TraceOptions& options) {
  check_options(options);
  auto lines = std::make_unique<LineReader>(options.path);
  std::string line = first_line(*lines);
  const FormatEntry& format =
      options.format == "auto" ? detect(options.path, line) : format_from_name(options.format);
  *options.counters = TraceCounters{};
  std::unique_ptr<RowParser> parser = format.make.open(std::move(lines), std::move(line));
  return std::make_unique<TraceSource>(options, format.make.csv, std::move(parser));
}

std::string detect_trace_format(const std::string& path) {
  LineReader lines(path);
  std::string line = first_line(lines);
  return detect(path, line).name;
}

TraceOptions parse_trace_options(const ConfigNode& node) {
  if (!node.is_map()) node.fail_expected("a trace (a map with at least 'path')");
  TraceOptions o;
  std::filesystem::path p(node.get<std::string>("path"));
  if (p.is_relative()) {
    std::filesystem::path base = std::filesystem::path(node.source()).parent_path();
    if (!base.empty()) p = base / p;
  }
  o.path = p.lexically_normal().string();
  o.format = node.get_enum("format", trace_format_choices(), "auto");
  if (auto w = node.optional_child("window_s")) {
    if (!w->is_sequence() || w->size() != 2) w->fail_expected("[start_s, end_s]");
    o.window_start_s = w->at(0).as<double>({.min = 0});
    if (!w->at(1).is_null()) {
      o.window_end_s = w->at(1).as<double>({.min = o.window_start_s, .min_exclusive = true});
    }
  }
  o.time_scale = node.get<double>("time_scale", 1.0, {.min = 0, .max = 1e9, .min_exclusive = true});
  const Bounds positive{.min = 1, .max = 9e15};
  o.max_requests = node.get_optional<int64_t>("max_requests", positive);
  o.max_prompt_tokens = node.get_optional<int64_t>("max_prompt_tokens", positive);
  o.max_output_tokens = node.get_optional<int64_t>("max_output_tokens", positive);
  o.on_bad_row = node.get_enum<BadRowPolicy>(
      "on_bad_row", {{"error", BadRowPolicy::kError}, {"skip", BadRowPolicy::kSkip}},
      BadRowPolicy::kError);
  // Checked here, where the scenario's line and column are known; the reader's own open error
  // stays for a file that vanishes between loading and replay.
  std::error_code ec;
  const auto status = std::filesystem::status(p, ec);
  if (!std::filesystem::exists(status)) {
    node.child("path").fail(fmt::format("trace file not found: {}", o.path));
  }
  if (!std::filesystem::is_regular_file(status)) {
    node.child("path").fail(fmt::format("trace path is not a regular file: {}", o.path));
  }
  return o;
}

}  // namespace kvsim
