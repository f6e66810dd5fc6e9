// End-to-end: the built kvsim binary, as a user runs it.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"

using kvsim::test::run_cli;
using Catch::Matchers::Contains;

TEST_CASE("kvsim kv --json reproduces seed A's figures", "[cli][golden]") {
  auto r = run_cli("kv --model seed-7b-mha --seq 2048,4096,8192,16384,32768 --batch 4 "
                   "--capacity-gb 80 --weights-gb 16 --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.size() == 5);
  CHECK(j[1]["kv_bytes_per_request"] == 2147483648LL);
  CHECK(j[2]["kv_bytes_per_request"] == 4294967296LL);
  CHECK(j[3]["kv_bytes_per_request"] == 8589934592LL);
  CHECK(j[4]["kv_bytes_per_request"] == 17179869184LL);
  CHECK(j[4]["kv_bytes_total"] == 68719476736LL);
  CHECK(j[4]["remaining_bytes"] == -4719476736LL);
  CHECK(j[4]["risk"] == "critical");
  CHECK(j[1]["risk"] == "safe");
  CHECK(j[0]["seq_len"] == 2048);
  CHECK(j[0]["batch"] == 4);
}

TEST_CASE("kvsim kv without a capacity has null remaining", "[cli]") {
  auto r = run_cli("kv --model llama-3-8b --seq 32768 --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j[0]["kv_bytes_per_request"] == 4294967296LL);
  CHECK(j[0]["remaining_bytes"].is_null());
  CHECK(j[0]["risk"] == "unknown");
}

TEST_CASE("kvsim kv human table labels GB and GiB", "[cli]") {
  auto r = run_cli("kv --gpu a100-sxm4-80gb --batch 4");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("GB = 1e9 bytes, GiB = 2^30 bytes"));
  CHECK_THAT(r.out, Contains("524,288 bytes of KV per token"));
}

TEST_CASE("kvsim kv rejects an unknown model with a suggestion and exit code 2", "[cli]") {
  auto r = run_cli("kv --model llama-3-8 --seq 10");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("unknown model 'llama-3-8'; did you mean 'llama-3-8b'?"));
  auto bad = run_cli("kv --seq abc");
  CHECK(bad.exit_code == 2);
}

TEST_CASE("kvsim models and gpus list the catalogs", "[cli]") {
  auto m = run_cli("models --json");
  REQUIRE(m.exit_code == 0);
  auto j = nlohmann::json::parse(m.out);
  std::vector<std::string> names;
  for (const auto& e : j) names.push_back(e["name"]);
  for (const char* want : {"llama-2-7b", "llama-3-8b", "llama-3-70b", "mistral-7b", "qwen2.5-7b",
                           "mixtral-8x7b", "seed-7b-mha", "llama-tiny"}) {
    CHECK(std::find(names.begin(), names.end(), want) != names.end());
  }
  auto g = run_cli("gpus --json");
  REQUIRE(g.exit_code == 0);
  auto gj = nlohmann::json::parse(g.out);
  // a100-sxm4-80gb, a100-sxm4-40gb, h100-sxm, h200, l40s, a40, rtx-pro-6000, rtx-4090, b200,
  // gb200, h20, mi300x, mi325x, l4 and cpu-host (the CPU replay's)
  CHECK(gj.size() == 15);
  auto human = run_cli("gpus");
  CHECK_THAT(human.out, Contains("h200"));
}
