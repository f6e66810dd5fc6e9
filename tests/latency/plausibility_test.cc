// The plausibility check: CSV parsing with positioned errors, verdict thresholds, and seed B.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "core/data_path.h"
#include "models/latency/plausibility.h"
#include "tests/latency/latency_test_util.h"

using namespace kvsim;
using Catch::Matchers::Contains;

namespace {

const char* kHeader = "label,model,gpu,attention,kv_heads,block_size,seq_len,batch,metric,value\n";

std::vector<Claim> parse(const std::string& rows) {
  return parse_claims(std::string(kHeader) + rows, "c.csv", Catalog::builtin());
}

ClaimCheck check_one(const std::string& row) {
  const auto claims = parse(row);
  REQUIRE(claims.size() == 1);
  return check_claim(claims[0], Catalog::builtin());
}

}  // namespace

TEST_CASE("claims parse, with units converted to seconds and tokens/s", "[latency][plausibility]") {
  const auto c = parse(
      "# comment\n\n\"a, quoted\",llama-3-8b,h100-sxm,flash,,16,8192,2,prefill_ms,12.5\r\n"
      "b,llama-3-8b,h100-sxm,native,2,0,100,1,decode_ms_per_token,20\n");
  REQUIRE(c.size() == 2);
  CHECK(c[0].label == "a, quoted");
  CHECK(c[0].line == 4);
  CHECK(c[0].claimed == Approx(0.0125));
  CHECK(c[0].block_tokens == 16);
  CHECK(c[0].batch == 2);
  CHECK(c[0].kv_heads == 0);
  CHECK(c[1].kv_heads == 2);
  CHECK(c[1].attention == AttentionKind::kNative);
  CHECK(c[1].throughput);
  CHECK(c[1].claimed == Approx(50.0));
}

TEST_CASE("malformed claim rows name the file and line", "[latency][plausibility]") {
  CHECK_THROWS_WITH(parse("a,llama-3-8b,h100-sxm,flash,,0,abc,1,prefill_ms,1\n"),
                    Contains("c.csv:2: column 'seq_len'") && Contains("\"abc\""));
  CHECK_THROWS_WITH(parse("a,llama-3-8b,h100-sxm,flash,,0,100,1,prefill_ms\n"),
                    Contains("c.csv:2: expected 10 fields, got 9"));
  CHECK_THROWS_WITH(parse("x,llama-3-8b,h100-sxm,flash,,0,100,1,prefill_ms,1\n"
                          "a,llama-3-8,h100-sxm,flash,,0,100,1,prefill_ms,1\n"),
                    Contains("c.csv:3: unknown model 'llama-3-8'; did you mean 'llama-3-8b'?"));
  CHECK_THROWS_WITH(parse("a,llama-3-8b,h100,flash,,0,100,1,prefill_ms,1\n"),
                    Contains("c.csv:2: unknown GPU 'h100'"));
  CHECK_THROWS_WITH(parse("a,llama-3-8b,h100-sxm,fast,,0,100,1,prefill_ms,1\n"),
                    Contains("c.csv:2: unknown attention kind 'fast' (expected native or flash)"));
  CHECK_THROWS_WITH(parse("a,llama-3-8b,h100-sxm,flash,3,0,100,1,prefill_ms,1\n"),
                    Contains("c.csv:2: column 'kv_heads': expected a divisor"));
  CHECK_THROWS_WITH(parse("a,llama-3-8b,h100-sxm,flash,,0,100,1,prefill_min,1\n"),
                    Contains("c.csv:2: column 'metric': unknown metric \"prefill_min\""));
  CHECK_THROWS_WITH(parse("a,llama-3-8b,h100-sxm,flash,,0,100,1,prefill_ms,-3\n"),
                    Contains("c.csv:2: column 'value': expected a number > 0"));
  CHECK_THROWS_WITH(parse("a,llama-3-8b,h100-sxm,flash,,0,100,1,prefill_ms,\"1\n"),
                    Contains("c.csv:2: unterminated quoted field"));
  CHECK_THROWS_WITH(parse_claims("label,model\n", "h.csv", Catalog::builtin()),
                    Contains("h.csv:1: header row lacks column 'gpu'"));
  CHECK_THROWS_WITH(parse_claims("# only a comment\n", "e.csv", Catalog::builtin()),
                    Contains("e.csv: no header row"));
  CHECK_THROWS_WITH(read_claims("/nonexistent/claims.csv", Catalog::builtin()),
                    Contains("/nonexistent/claims.csv: no such file"));
}

TEST_CASE("verdicts follow the bound and the 2x estimate threshold", "[latency][plausibility]") {
  // Times: bound 1 s, estimate 3 s.
  CHECK(judge(0.99, 1.0, 3.0, false) == Verdict::kImpossible);
  CHECK(judge(1.0, 1.0, 3.0, false) == Verdict::kOptimistic);  // exactly at the bound: possible
  CHECK(judge(1.49, 1.0, 3.0, false) == Verdict::kOptimistic);
  CHECK(judge(1.5, 1.0, 3.0, false) == Verdict::kPlausible);  // exactly 2x: not more than 2x
  CHECK(judge(30.0, 1.0, 3.0, false) == Verdict::kPlausible);
  // Throughputs: at most 100 tok/s, estimate 30 tok/s.
  CHECK(judge(101, 100, 30, true) == Verdict::kImpossible);
  CHECK(judge(61, 100, 30, true) == Verdict::kOptimistic);
  CHECK(judge(60, 100, 30, true) == Verdict::kPlausible);
  CHECK(judge(1, 100, 30, true) == Verdict::kPlausible);
}

TEST_CASE("check_claim: just below the bound is impossible, just above is not",
          "[latency][plausibility]") {
  const auto ref = check_one("r,llama-3-8b,a100-sxm4-80gb,flash,,0,8192,1,prefill_ms,1000\n");
  const double lb_ms = ref.lower_bound * 1e3;
  REQUIRE(lb_ms < ref.estimate * 1e3);
  auto verdict_at = [&](double ms) {
    return check_one(fmt::format("r,llama-3-8b,a100-sxm4-80gb,flash,,0,8192,1,prefill_ms,{}\n", ms))
        .verdict;
  };
  CHECK(verdict_at(lb_ms * 0.99) == Verdict::kImpossible);
  CHECK(verdict_at(lb_ms * 1.01) != Verdict::kImpossible);
  CHECK(verdict_at(ref.estimate * 1e3 * 10) == Verdict::kPlausible);
  const auto d = check_one("r,llama-3-8b,a100-sxm4-80gb,flash,,0,8192,1,decode_tokens_per_s,1\n");
  auto dverdict = [&](double tps) {
    return check_one(
               fmt::format("r,llama-3-8b,a100-sxm4-80gb,flash,,0,8192,1,decode_tokens_per_s,{}\n",
                           tps))
        .verdict;
  };
  CHECK(dverdict(d.lower_bound * 1.01) == Verdict::kImpossible);
  CHECK(dverdict(d.lower_bound * 0.99) != Verdict::kImpossible);
  CHECK(dverdict(d.estimate * 0.5) == Verdict::kPlausible);
  CHECK(d.bound_fraction == Approx(1.0 / d.lower_bound));
}

TEST_CASE("seed B: every prefill/TTFT claim but the 16k native ones is below the physical bound",
          "[latency][plausibility][golden]") {
  const auto claims = read_claims(data_file("scenarios/claims/seed-b.csv"), Catalog::builtin());
  REQUIRE(claims.size() == 15);
  int impossible = 0;
  for (const Claim& c : claims) {
    const ClaimCheck r = check_claim(c, Catalog::builtin());
    INFO("line " << c.line << " " << c.label << " " << c.metric);
    const bool native16k = c.attention == AttentionKind::kNative && c.seq_len == 16384;
    if (c.kind == ClaimKind::kDecode || native16k) {
      CHECK(r.verdict == Verdict::kPlausible);
    } else {
      CHECK(r.verdict == Verdict::kImpossible);
      // Impossible even if every kernel overlapped perfectly: FLOPs alone need longer.
      CHECK(r.compute_floor_s > c.claimed);
      ++impossible;
    }
    CHECK(r.lower_bound > 0);
  }
  CHECK(impossible == 8);
  // facts.md 7: 16,384 tokens with FA2 need >= ~0.9 s at 312 TFLOP/s; the seed claims 210.4 ms.
  const ClaimCheck fa2 = check_claim(claims[6], Catalog::builtin());
  CHECK(claims[6].value == 210.4);
  CHECK(fa2.compute_floor_s == Approx(0.906).epsilon(0.01));
  CHECK(fa2.implied_flops_per_s / 312e12 == Approx(4.31).epsilon(0.01));
  // The 16k native prefill needs ~99% of the kernel-by-kernel bound (facts.md 7: ~98%).
  const ClaimCheck native = check_claim(claims[3], Catalog::builtin());
  CHECK(native.bound_fraction == Approx(0.99).epsilon(0.02));
}
