// Trace readers on small real files (first 2,000 rows of the shared traces) and on the full
// scenario copies: row counts, first/last rows, format detection, ids, prefix hashes.
#include "workloads/traces/trace_reader.h"

#include <unistd.h>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "tests/workloads/test_util.h"

using namespace kvsim;
using kvsim::test::data_path;
using kvsim::test::drain;
using kvsim::test::source_path;

namespace {

std::vector<RequestSpec> read_all(const std::string& path, const std::string& format = "auto") {
  TraceOptions o;
  o.path = path;
  o.format = format;
  auto s = open_trace(o);
  auto v = drain(*s);
  CHECK(o.counters->requests == static_cast<int64_t>(v.size()));
  CHECK(o.counters->skipped_bad_rows == 0);
  return v;
}

void check_dense_and_sorted(const std::vector<RequestSpec>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    REQUIRE(v[i].id == static_cast<int64_t>(i));
    REQUIRE(v[i].client == -1);
    if (i > 0) REQUIRE(v[i].arrival >= v[i - 1].arrival);
  }
}

}  // namespace

TEST_CASE("formats are detected from the first line", "[trace]") {
  CHECK(detect_trace_format(data_path("traces/azure-conv-2023.head2000.csv")) == "normalized");
  CHECK(detect_trace_format(data_path("traces/azure-conv-2023.head2000.orig.csv")) == "azure");
  CHECK(detect_trace_format(data_path("traces/mooncake-conversation.head2000.orig.jsonl")) ==
        "mooncake");
  CHECK(detect_trace_format(data_path("traces/burstgpt-format.fixture.csv")) == "burstgpt");
  CHECK(detect_trace_format(data_path("traces/vidur-splitwise-conv.head2000.csv")) == "vidur");
}

TEST_CASE("Azure CSV: 2,000 real rows, times relative to the first row, exact to the ns",
          "[trace]") {
  auto v = read_all(data_path("traces/azure-conv-2023.head2000.orig.csv"));
  REQUIRE(v.size() == 2000);
  check_dense_and_sorted(v);
  // 2023-11-16 18:15:46.6805900,374,44 / 18:15:50.9951690,396,109 / ... / 18:22:50.9400470,424,96
  CHECK(v[0].arrival == 0);
  CHECK(v[0].prompt_tokens == 374);
  CHECK(v[0].output_tokens == 44);
  CHECK(v[1].arrival == 4'314'579'000);
  CHECK(v[1].prompt_tokens == 396);
  CHECK(v[1].output_tokens == 109);
  CHECK(v.back().arrival == 424'259'457'000);
  CHECK(v.back().prompt_tokens == 424);
  CHECK(v.back().output_tokens == 96);
  CHECK(v.back().prefix_hashes.empty());
}

TEST_CASE("normalized CSV agrees with the Azure original row by row (ms rounding)", "[trace]") {
  auto norm = read_all(data_path("traces/azure-conv-2023.head2000.csv"));
  auto orig = read_all(data_path("traces/azure-conv-2023.head2000.orig.csv"));
  auto vidur = read_all(data_path("traces/vidur-splitwise-conv.head2000.csv"));
  REQUIRE(norm.size() == 2000);
  REQUIRE(orig.size() == 2000);
  REQUIRE(vidur.size() == 2000);
  CHECK(norm[1].arrival == 4'315'000'000);
  CHECK(norm.back().arrival == 424'259'000'000);
  for (size_t i = 0; i < norm.size(); ++i) {
    INFO("row " << i);
    REQUIRE(norm[i].prompt_tokens == orig[i].prompt_tokens);
    REQUIRE(norm[i].output_tokens == orig[i].output_tokens);
    REQUIRE(std::llabs(norm[i].arrival - orig[i].arrival) <= 500'000);  // rounded to ms
    REQUIRE(vidur[i].prompt_tokens == orig[i].prompt_tokens);
    REQUIRE(std::llabs(vidur[i].arrival - orig[i].arrival) <= 1'000);  // microseconds
  }
}

TEST_CASE("Azure code trace reads with the same reader", "[trace]") {
  auto v = read_all(data_path("traces/azure-code-2023.head2000.orig.csv"), "azure");
  REQUIRE(v.size() == 2000);
  check_dense_and_sorted(v);
  CHECK(v[0].prompt_tokens == 4808);
  CHECK(v[0].output_tokens == 10);
  CHECK(v[1].arrival == 52'000'000);  // 18:17:04.0319600 - 18:17:03.9799600
}

TEST_CASE("Mooncake JSONL: lengths, ms timestamps and 512-token prefix hashes", "[trace]") {
  auto v = read_all(data_path("traces/mooncake-conversation.head2000.orig.jsonl"));
  REQUIRE(v.size() == 2000);
  check_dense_and_sorted(v);
  CHECK(v[0].arrival == 0);
  CHECK(v[0].prompt_tokens == 6758);
  CHECK(v[0].output_tokens == 500);
  CHECK(v[0].hash_block_tokens == 512);
  REQUIRE(v[0].prefix_hashes.size() == 14);
  CHECK(v[0].prefix_hashes.front() == 0);
  CHECK(v[0].prefix_hashes.back() == 13);
  CHECK(v[1].prefix_hashes ==
        std::vector<uint64_t>{0, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27});
  // {"timestamp": 669000, "input_length": 1504, "output_length": 462, "hash_ids": [0, 36636,
  // 38787]}
  CHECK(v.back().arrival == 669'000'000'000);
  CHECK(v.back().prompt_tokens == 1504);
  CHECK(v.back().output_tokens == 462);
  CHECK(v.back().prefix_hashes == std::vector<uint64_t>{0, 36636, 38787});
  // Equal timestamps are real in Mooncake (a ~3 s grid) and must pass.
  CHECK(v[1].arrival == v[0].arrival);
}

TEST_CASE("BurstGPT and Vidur columns are found by name", "[trace]") {
  auto b = read_all(data_path("traces/burstgpt-format.fixture.csv"));
  REQUIRE(b.size() == 500);
  check_dense_and_sorted(b);
  CHECK(b[0].prompt_tokens == 374);
  CHECK(b[0].output_tokens == 44);
  CHECK(b[1].arrival == 4 * kNsPerSecond);
  auto v = read_all(data_path("traces/vidur-splitwise-conv.head2000.csv"), "vidur");
  CHECK(v[1].arrival == 4'314'579'000);
}

TEST_CASE("the full scenario traces: every row, sorted, hashes cover each prompt", "[trace]") {
  auto azure = read_all(source_path("scenarios/traces/azure-conv-2023.csv"));
  REQUIRE(azure.size() == 19366);
  check_dense_and_sorted(azure);
  CHECK(azure.back().arrival == 3'501'722'000'000);
  CHECK(azure.back().prompt_tokens == 197);
  CHECK(azure.back().output_tokens == 183);
  auto moon = read_all(source_path("scenarios/traces/mooncake-conversation.orig.jsonl"));
  REQUIRE(moon.size() == 12031);
  check_dense_and_sorted(moon);
  int64_t prompt_sum = 0;
  for (const auto& r : moon) {
    prompt_sum += r.prompt_tokens;
    REQUIRE(static_cast<int64_t>(r.prefix_hashes.size()) == (r.prompt_tokens + 511) / 512);
  }
  // The source README: average input 12,035 tokens.
  CHECK(std::llround(static_cast<double>(prompt_sum) / 12031.0) == 12035);
  CHECK(moon.back().arrival == 3'536'999'000'000);
}

TEST_CASE("CRLF line ends, a BOM, blank lines and a complete last line without newline pass",
          "[trace]") {
  auto p =
      kvsim::test::temp_file("crlf.csv",
                             "\xEF\xBB\xBF"
                             "arrival_s,prompt_tokens,output_tokens\r\n0.5,10,2\r\n\r\n1.25,20,3");
  auto v = read_all(p);
  REQUIRE(v.size() == 2);
  CHECK(v[0].arrival == 0);
  CHECK(v[1].arrival == 750'000'000);
  CHECK(v[1].output_tokens == 3);
}

TEST_CASE("an explicit format must match the header", "[trace]") {
  TraceOptions o;
  o.path = data_path("traces/azure-conv-2023.head2000.csv");
  o.format = "azure";
  CHECK_THROWS_WITH(open_trace(o),
                    o.path +
                        ":1: expected the azure trace header with columns "
                        "TIMESTAMP,ContextTokens,GeneratedTokens, got "
                        "'arrival_s,prompt_tokens,output_tokens' (no column 'TIMESTAMP')");
  o.format = "parquet";
  CHECK_THROWS_AS(open_trace(o), InputError);
  o.path = data_path("traces/does-not-exist.csv");
  o.format = "auto";
  CHECK_THROWS_WITH(open_trace(o), Catch::Matchers::Contains("cannot open trace file"));
}

TEST_CASE("Mooncake JSONL: a huge input_length reserves no more hash ids than the line holds",
          "[trace]") {
  // The fuzzer's find: input_length 10^15 asked the hash list for 10^15 / 512 ids up front (16
  // TB) before reading the two the line has. The reservation is bounded by the line now.
  const std::string path = std::filesystem::temp_directory_path() /
                           ("kvsim-huge-input-length-" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream f(path);
    f << R"({"timestamp": 0, "input_length": 1000000000000000, "output_length": 5, "hash_ids": [0, 1]})"
      << "\n";
  }
  TraceOptions o;
  o.path = path;
  auto s = open_trace(o);
  const auto v = drain(*s);
  REQUIRE(v.size() == 1);
  CHECK(v[0].prompt_tokens == 1'000'000'000'000'000);
  CHECK(v[0].prefix_hashes == std::vector<uint64_t>{0, 1});
  std::filesystem::remove(path);
}
