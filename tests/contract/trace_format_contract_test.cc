// The trace reader contract, run over every entry of the trace format registry: a format
// registered in register_trace_formats() gets this suite without anyone editing it.
// How it fails: a format that cannot read the sample it declares, that `format: auto` does not
// recognise from its own sample, that another format claims first, or that accepts its bad row
// (or reports it without the row's line number) fails the CHECK that says which.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "workloads/traces/trace_formats.h"
#include "workloads/traces/trace_reader.h"

using namespace kvsim;
namespace fs = std::filesystem;

namespace {

fs::path write_sample(const std::string& name, const std::string& text) {
  const fs::path dir =
      fs::temp_directory_path() / ("kvsim-trace-contract-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path p = dir / (name + ".trace");
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

std::vector<RequestSpec> read_all(const std::string& path, const std::string& format) {
  TraceOptions o;
  o.path = path;
  o.format = format;
  auto source = open_trace(o);
  std::vector<RequestSpec> out;
  while (auto r = source->next()) out.push_back(*r);
  return out;
}

int64_t line_count(const std::string& text) {
  return static_cast<int64_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("every registered trace format reads its sample and rejects a bad row with its line",
          "[contract][workload][trace]") {
  const auto& entries = trace_format_registry().entries();
  REQUIRE(entries.size() >= 5);
  for (const auto& entry : entries) {
    INFO("trace format " << entry.name);
    const TraceFormatFactory& f = entry.make;
    REQUIRE_FALSE(f.sample.empty());
    REQUIRE_FALSE(f.bad_row.empty());
    const fs::path good = write_sample(entry.name, f.sample);

    // Read by name and by detection: the same requests, ids dense from 0, arrivals from 0.
    const auto rows = read_all(good.string(), entry.name);
    const int64_t data_rows = line_count(f.sample) - (f.csv ? 1 : 0);
    REQUIRE(static_cast<int64_t>(rows.size()) == data_rows);
    CHECK(rows.front().arrival == 0);
    for (size_t i = 0; i < rows.size(); ++i) {
      CHECK(rows[i].id == static_cast<int64_t>(i));
      CHECK(rows[i].prompt_tokens >= 1);
      CHECK(rows[i].output_tokens >= 1);
      if (i > 0) CHECK(rows[i].arrival >= rows[i - 1].arrival);
    }
    CHECK(detect_trace_format(good.string()) == entry.name);
    CHECK(read_all(good.string(), "auto").size() == rows.size());

    // The bad row, appended, fails on its own line.
    const fs::path bad = write_sample(entry.name + "-bad", f.sample + f.bad_row);
    const std::string where = bad.string() + ":" + std::to_string(line_count(f.sample) + 1) + ":";
    CHECK_THROWS_WITH(read_all(bad.string(), entry.name), Catch::Matchers::StartsWith(where));
  }
}
