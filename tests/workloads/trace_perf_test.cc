// Reader throughput (hidden: run with `kvsim_workloads_tests "[perf]"`). The engine must replay a
// million requests in under 10 s in total, so parsing must stay far below that: >= 2M rows/s.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "tests/workloads/test_util.h"
#include "workloads/traces/trace_reader.h"

using namespace kvsim;

namespace {

double rows_per_s(const std::string& path, int64_t expect_rows) {
  auto t0 = std::chrono::steady_clock::now();
  TraceOptions o;
  o.path = path;
  auto s = open_trace(o);
  int64_t n = 0, sum = 0;
  while (auto r = s->next()) {
    ++n;
    sum += r->prompt_tokens + static_cast<int64_t>(r->prefix_hashes.size());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(n == expect_rows);
  REQUIRE(sum > 0);
  return static_cast<double>(n) / secs;
}

}  // namespace

TEST_CASE("readers parse at least 2M rows/s", "[.][perf]") {
  constexpr int64_t kRows = 2'000'000;
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string csv = dir + "/kvsim_perf_norm.csv", az = dir + "/kvsim_perf_azure.csv",
                    jl = dir + "/kvsim_perf_mooncake.jsonl";
  {
    std::FILE* a = std::fopen(csv.c_str(), "wb");
    std::FILE* b = std::fopen(az.c_str(), "wb");
    std::FILE* c = std::fopen(jl.c_str(), "wb");
    std::fputs("arrival_s,prompt_tokens,output_tokens\n", a);
    std::fputs("TIMESTAMP,ContextTokens,GeneratedTokens\n", b);
    for (int64_t i = 0; i < kRows; ++i) {
      const int64_t ms = i * 7;
      std::fprintf(a, "%lld.%03lld,%lld,%lld\n", static_cast<long long>(ms / 1000),
                   static_cast<long long>(ms % 1000), static_cast<long long>(100 + i % 4000),
                   static_cast<long long>(1 + i % 500));
      const int64_t s = ms / 1000;
      std::fprintf(b, "2023-11-16 %02lld:%02lld:%02lld.%03lld0000,%lld,%lld\n",
                   static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60),
                   static_cast<long long>(s % 60), static_cast<long long>(ms % 1000),
                   static_cast<long long>(100 + i % 4000), static_cast<long long>(1 + i % 500));
      const int64_t in = 600 + i % 12000;
      std::fprintf(c,
                   "{\"timestamp\": %lld, \"input_length\": %lld, \"output_length\": %lld, "
                   "\"hash_ids\": [",
                   static_cast<long long>(ms), static_cast<long long>(in),
                   static_cast<long long>(1 + i % 500));
      for (int64_t h = 0; h < (in + 511) / 512; ++h) {
        std::fprintf(c, h ? ", %lld" : "%lld", static_cast<long long>(i * 3 + h));
      }
      std::fputs("]}\n", c);
    }
    std::fclose(a);
    std::fclose(b);
    std::fclose(c);
  }
  const double norm = rows_per_s(csv, kRows), azure = rows_per_s(az, kRows),
               moon = rows_per_s(jl, kRows);
  std::printf(
      "normalized CSV: %.2f M rows/s\nAzure CSV: %.2f M rows/s\n"
      "Mooncake JSONL (avg 12.7 hash ids/row): %.2f M rows/s\n",
      norm / 1e6, azure / 1e6, moon / 1e6);
  CHECK(norm >= 2e6);
  CHECK(azure >= 2e6);
  std::remove(csv.c_str());
  std::remove(az.c_str());
  std::remove(jl.c_str());
}
