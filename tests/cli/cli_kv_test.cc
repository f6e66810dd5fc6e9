// End-to-end: the built kvsim binary, as a user runs it.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"

using Catch::Matchers::Contains;
using kvsim::test::run_cli;

TEST_CASE("kvsim kv --json reproduces seed A's figures", "[cli][golden]") {
  auto r = run_cli(
      "kv --model seed-7b-mha --seq 2048,4096,8192,16384,32768 --batch 4 "
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

// Mistral-7B-v0.1: 32 layers x 8 KV heads x head dim 128 x 2 (K, V) x 2 bytes = 131,072 bytes a
// token. At 32,768 tokens full attention holds 32,768 x 131,072 = 4,294,967,296 bytes (4.29 GB);
// under its 4,096-token window vLLM's paged store holds at most the window's 256 blocks of 16
// plus the one being filled: 4,112 tokens x 131,072 = 538,968,064 bytes (0.54 GB). At 2,048
// tokens (inside the window) both are 2,048 x 131,072 = 268,435,456. With 32-token blocks:
// (128 + 1) x 32 = 4,128 tokens, 541,065,216 bytes.
TEST_CASE("kvsim kv shows the KV a sliding window holds beside full attention", "[cli]") {
  auto r = run_cli("kv --model mistral-7b --seq 2048,32768 --batch 2 --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.size() == 2);
  CHECK(j[1]["kv_bytes_per_request"] == 4294967296LL);
  CHECK(j[1]["sliding_window"] == 4096);
  CHECK(j[1]["block_size"] == 16);
  CHECK(j[1]["window_kv_bytes_per_request"] == 538968064LL);
  CHECK(j[1]["window_kv_bytes_total"] == 2 * 538968064LL);
  CHECK(j[0]["window_kv_bytes_per_request"] == 268435456LL);
  CHECK(j[0]["kv_bytes_per_request"] == 268435456LL);
  auto b32 = run_cli("kv --model mistral-7b --seq 32768 --block-size 32 --json");
  REQUIRE(b32.exit_code == 0);
  CHECK(nlohmann::json::parse(b32.out)[0]["window_kv_bytes_per_request"] == 541065216LL);
  auto human = run_cli("kv --model mistral-7b --seq 32768");
  REQUIRE(human.exit_code == 0);
  CHECK_THAT(human.out, Contains("sliding window of 4,096 tokens"));
  CHECK_THAT(human.out, Contains("held under the window"));
  CHECK_THAT(human.out, Contains("4.29 / 4.00"));  // full attention, GB / GiB
  CHECK_THAT(human.out, Contains("0.54 / 0.50"));  // held: 538,968,064 B
  // A full-attention model has neither the columns nor the JSON keys.
  auto full = run_cli("kv --model llama-3-8b --seq 32768 --json");
  CHECK_FALSE(nlohmann::json::parse(full.out)[0].contains("window_kv_bytes_per_request"));
}

// Qwen2.5-7B is GQA (28 query heads, 4 KV heads). At TP 4 each GPU holds 1 KV head (and 7 query
// heads): still GQA, labelled with its per-GPU head count, not "MQA". Per GPU: 28 layers x 1 x
// 128 x 2 x 2 bytes (bf16) = 14,336 bytes a token.
TEST_CASE("kvsim kv per GPU keeps the model's attention kind", "[cli]") {
  auto r = run_cli("kv --model qwen2.5-7b --seq 1024 --tp 4");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("(GQA: 28 layers x 1 KV head per GPU x head dim 128"));
  CHECK_THAT(r.out, Contains("14,336 bytes of KV per token"));
  CHECK_THAT(r.out, !Contains("MQA"));
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
