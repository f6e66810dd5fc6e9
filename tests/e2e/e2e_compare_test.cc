// compare_e2e on hand-made modeled/ and measured/ folders: 5 iterations, 4 requests of one policy.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "validate/replay/e2e_compare.h"
#include "validate/replay/e2e_plot.h"

using namespace kvsim::validate;
namespace fs = std::filesystem;

namespace {

const double kEps = 1e-12;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

const char* kHeader =
    "policy,id,arrival_s,prompt_tokens,prompt_tokens_served,output_tokens,generated,outcome,"
    "ttft_s,tpot_s,e2e_s,preemptions,tokens_dropped,guard_queue_s,engine_wait_s,prefill_s,"
    "decode_s,preempted_s\n";

// The iterations (e = (modeled - measured) / measured):
//   0  prefill-only, 100 tokens (bin 64-511)        0.011 vs 0.010   e = +0.1
//   1  mixed, 20 prefill + 2 decode = 22 (8-63)     0.009 vs 0.010   e = -0.1
//   2  decode-only, 3 seqs (1-7)                   0.0048 vs 0.004   e = +0.2
//   3  decode-only, 3 seqs (1-7)                    0.004 vs 0.005   e = -0.2
//   4  decode-only, 2 seqs (1-7)                    0.004 vs 0.004   e =  0
// Requests of policy p (ttft, tpot, e2e; empty = none):
//   id  modeled                      measured
//   0   0.10 0.010 0.5  completed    0.08 0.010 0.4  completed
//   1   0.20 0.020 0.8  completed 1p 0.25 0.025 1.0  completed 2p   (p: preemptions)
//   2   0.30  -    0.30 completed    0.30  -    0.25 completed
//   3    -    -     -   rejected      -    -     -   rejected
fs::path make_folders() {
  // Each case runs in its own process, in parallel with the others: a folder per process.
  const fs::path d =
      fs::temp_directory_path() / ("kvsim_e2e_compare_test_" + std::to_string(::getpid()));
  fs::remove_all(d);
  write(
      d / "measured/iterations.csv",
      "policy,replica,index,start_s,prefill_seqs,prefill_tokens,decode_seqs,decode_context_tokens,"
      "modeled_s,measured_s\n"
      "p,0,0,0,1,100,0,0,0.011,0.010\n"
      "p,0,1,0.01,1,20,2,50,0.009,0.010\n"
      "p,0,2,0.02,0,0,3,90,0.0048,0.004\n"
      "p,0,3,0.024,0,0,3,93,0.004,0.005\n"
      "p,0,4,0.029,0,0,2,60,0.004,0.004\n");
  write(d / "modeled/requests.csv", std::string(kHeader) +
                                        "p,0,0,10,10,5,5,completed,0.10,0.010,0.5,0,0,0,0,0,0,0\n"
                                        "p,1,0.1,10,10,5,5,completed,0.20,0.020,0.8,1,0,0,0,0,0,0\n"
                                        "p,2,0.2,10,10,1,1,completed,0.30,,0.30,0,0,0,0,0,0,0\n"
                                        "p,3,0.3,10,0,5,0,rejected,,,,0,0,0,0,0,0,0\n");
  write(d / "measured/requests.csv",
        std::string(kHeader) +
            "p,0,0,10,10,5,5,completed,0.08,0.010,0.4,0,0,0,0,0,0,0\n"
            "p,1,0.1,10,10,5,5,completed,0.25,0.025,1.0,2,0,0,0,0,0,0\n"
            "p,2,0.2,10,10,1,1,completed,0.30,,0.25,0,0,0,0,0,0,0\n"
            "p,3,0.3,10,0,5,0,rejected,,,,0,0,0,0,0,0,0\n");
  return d;
}

const IterationGroup& find(const E2eComparison& c, const std::string& name) {
  for (const IterationGroup& g : c.iterations) {
    if (g.name == name) return g;
  }
  FAIL("no group " << name);
  return c.iterations.front();
}

}  // namespace

TEST_CASE("e2e compare: per-iteration MAPE, median and p90 by group", "[e2e_compare]") {
  const fs::path d = make_folders();
  const E2eComparison c = compare_e2e(d / "modeled", d / "measured");
  // Groups in order: all, the shapes present, the token bins present.
  REQUIRE(c.iterations.size() == 7);
  CHECK(c.iterations[0].name == "all");
  CHECK(c.iterations[1].name == "prefill-only");
  CHECK(c.iterations[2].name == "decode-only");
  CHECK(c.iterations[3].name == "mixed");
  CHECK(c.iterations[4].name == "1-7");
  CHECK(c.iterations[5].name == "8-63");
  CHECK(c.iterations[6].name == "64-511");
  // all: e = {-0.2, -0.1, 0, 0.1, 0.2} sorted. MAPE = (0.1+0.1+0.2+0.2+0)/5 = 0.12; median 0;
  // p90 at rank 0.9 x 4 = 3.6: 0.1 + 0.6 x (0.2 - 0.1) = 0.16. Totals: modeled 0.011 + 0.009 +
  // 0.0048 + 0.004 + 0.004 = 0.0328, measured 0.010 + 0.010 + 0.004 + 0.005 + 0.004 = 0.033.
  const IterationGroup& all = find(c, "all");
  CHECK(all.iterations == 5);
  CHECK(all.mape == Approx(0.12).margin(kEps));
  CHECK(all.median_rel_error == Approx(0.0).margin(kEps));
  CHECK(all.p90_rel_error == Approx(0.16).margin(kEps));
  CHECK(all.modeled_s == Approx(0.0328).margin(kEps));
  CHECK(all.measured_s == Approx(0.033).margin(kEps));
  // decode-only: e = {-0.2, 0, 0.2}: MAPE 0.4/3 = 0.133333...; median 0; p90 at rank 1.8:
  // 0 + 0.8 x 0.2 = 0.16. The 1-7 bin holds the same three iterations.
  for (const char* g : {"decode-only", "1-7"}) {
    CHECK(find(c, g).iterations == 3);
    CHECK(find(c, g).mape == Approx(0.4 / 3).margin(kEps));
    CHECK(find(c, g).median_rel_error == Approx(0.0).margin(kEps));
    CHECK(find(c, g).p90_rel_error == Approx(0.16).margin(kEps));
  }
  // One iteration each: its own error.
  CHECK(find(c, "prefill-only").mape == Approx(0.1).margin(kEps));
  CHECK(find(c, "64-511").p90_rel_error == Approx(0.1).margin(kEps));
  CHECK(find(c, "mixed").median_rel_error == Approx(-0.1).margin(kEps));
  CHECK(find(c, "8-63").mape == Approx(0.1).margin(kEps));
}

TEST_CASE("e2e compare: per-request medians, p90s, error CDF, outcomes", "[e2e_compare]") {
  const fs::path d = make_folders();
  const E2eComparison c = compare_e2e(d / "modeled", d / "measured");
  REQUIRE(c.policies.size() == 1);
  const PolicyCompare& p = c.policies[0];
  CHECK(p.policy == "p");
  CHECK(p.matched == 4);
  REQUIRE(p.metrics.size() == 3);
  // TTFT, ids 0-2 (3 has none): modeled {0.10, 0.20, 0.30}: median 0.20, p90 at rank 1.8 =
  // 0.20 + 0.8 x 0.10 = 0.28; measured {0.08, 0.25, 0.30}: median 0.25, p90 0.25 + 0.8 x 0.05 =
  // 0.29. Errors: medians (0.20 - 0.25)/0.25 = -0.2; p90s (0.28 - 0.29)/0.29 = -0.01/0.29.
  // Per request: (0.10-0.08)/0.08 = 0.25, (0.20-0.25)/0.25 = -0.2, 0: median |e| = 0.2; CDF
  // (sorted -0.2, 0, 0.25): q0 -0.2, q0.5 0, q0.9 0 + 0.8 x 0.25 = 0.2, q1 0.25.
  const MetricCompare& ttft = p.metrics[0];
  CHECK(ttft.metric == "ttft");
  CHECK(ttft.requests == 3);
  CHECK(ttft.modeled_median == Approx(0.20).margin(kEps));
  CHECK(ttft.modeled_p90 == Approx(0.28).margin(kEps));
  CHECK(ttft.measured_median == Approx(0.25).margin(kEps));
  CHECK(ttft.measured_p90 == Approx(0.29).margin(kEps));
  CHECK(ttft.median_rel_error == Approx(-0.2).margin(kEps));
  CHECK(ttft.p90_rel_error == Approx(-0.01 / 0.29).margin(kEps));
  CHECK(ttft.median_abs_request_error == Approx(0.2).margin(kEps));
  REQUIRE(ttft.cdf.size() == 11);
  CHECK(ttft.cdf[0].first == 0.0);
  CHECK(ttft.cdf[0].second == Approx(-0.2).margin(kEps));
  CHECK(ttft.cdf[5].second == Approx(0.0).margin(kEps));
  CHECK(ttft.cdf[9].second == Approx(0.2).margin(kEps));
  CHECK(ttft.cdf[10].first == 1.0);
  CHECK(ttft.cdf[10].second == Approx(0.25).margin(kEps));
  // TPOT, ids 0-1: modeled {0.010, 0.020}: median 0.015, p90 0.010 + 0.9 x 0.010 = 0.019;
  // measured {0.010, 0.025}: median 0.0175, p90 0.010 + 0.9 x 0.015 = 0.0235. Errors
  // (0.015 - 0.0175)/0.0175 = -1/7 and (0.019 - 0.0235)/0.0235 = -0.0045/0.0235.
  const MetricCompare& tpot = p.metrics[1];
  CHECK(tpot.requests == 2);
  CHECK(tpot.modeled_median == Approx(0.015).margin(kEps));
  CHECK(tpot.modeled_p90 == Approx(0.019).margin(kEps));
  CHECK(tpot.measured_median == Approx(0.0175).margin(kEps));
  CHECK(tpot.measured_p90 == Approx(0.0235).margin(kEps));
  CHECK(tpot.median_rel_error == Approx(-1.0 / 7).margin(kEps));
  CHECK(tpot.p90_rel_error == Approx(-0.0045 / 0.0235).margin(kEps));
  // E2E, ids 0-2: modeled {0.3, 0.5, 0.8}: median 0.5, p90 0.5 + 0.8 x 0.3 = 0.74; measured
  // {0.25, 0.4, 1.0}: median 0.4, p90 0.4 + 0.8 x 0.6 = 0.88. Errors 0.1/0.4 = 0.25 and
  // -0.14/0.88.
  const MetricCompare& e2e = p.metrics[2];
  CHECK(e2e.requests == 3);
  CHECK(e2e.modeled_p90 == Approx(0.74).margin(kEps));
  CHECK(e2e.measured_p90 == Approx(0.88).margin(kEps));
  CHECK(e2e.median_rel_error == Approx(0.25).margin(kEps));
  CHECK(e2e.p90_rel_error == Approx(-0.14 / 0.88).margin(kEps));
  // Preemptions: the column's sums, 0+1+0+0 = 1 and 0+2+0+0 = 2; outcomes 3 completed + 1
  // rejected on both sides.
  CHECK(p.modeled_preemptions == 1);
  CHECK(p.measured_preemptions == 2);
  CHECK(p.modeled_outcomes.at("completed") == 3);
  CHECK(p.measured_outcomes.at("rejected") == 1);
  CHECK(p.outcomes_identical());
}

TEST_CASE("e2e compare: the written files", "[e2e_compare]") {
  const fs::path d = make_folders();
  write_e2e(compare_e2e(d / "modeled", d / "measured"), d);
  std::ifstream in(d / "e2e.json");
  const auto j = nlohmann::json::parse(in);
  CHECK(j["iterations"][0]["mape"].get<double>() == Approx(0.12).margin(kEps));
  CHECK(j["policies"][0]["metrics"]["ttft"]["median_rel_error"].get<double>() ==
        Approx(-0.2).margin(kEps));
  CHECK(j["policies"][0]["outcomes"]["identical"].get<bool>());
  std::ifstream it(d / "e2e_iterations.csv");
  std::string header, first;
  std::getline(it, header);
  std::getline(it, first);
  CHECK(header == "kind,group,iterations,mape,median_rel_error,p90_rel_error,modeled_s,measured_s");
  // 9 significant digits: 0.12 and 0.16 print short; the totals as written.
  CHECK(first == "all,all,5,0.12,0,0.16,0.0328,0.033");
  std::ifstream rq(d / "e2e_requests.csv");
  std::string rows((std::istreambuf_iterator<char>(rq)), {});
  CHECK(rows.find("p,ttft,3,0.2,0.25,-0.2,0.28,0.29,-0.0344827586,0.2\n") != std::string::npos);
}

TEST_CASE("e2e compare: the one-screen table", "[e2e_compare]") {
  const fs::path d = make_folders();
  const std::string t = e2e_table(compare_e2e(d / "modeled", d / "measured"));
  INFO(t);
  // MAPE 12.0%, median +0.0%, p90 +16.0% (above); TTFT medians 200.00 / 250.00 ms, -20.0%.
  CHECK(t.find("12.0%") != std::string::npos);
  CHECK(t.find("+16.0%") != std::string::npos);
  CHECK(t.find("200.00 / 250.00") != std::string::npos);
  CHECK(t.find("p: outcomes modeled [completed 3, rejected 1] measured [completed 3, rejected 1] "
               "(identical); preemptions 1 / 2") != std::string::npos);
}

TEST_CASE("e2e compare: bad input names the file and line", "[e2e_compare]") {
  const fs::path d = make_folders();
  write(
      d / "measured/iterations.csv",
      "policy,replica,index,start_s,prefill_seqs,prefill_tokens,decode_seqs,decode_context_tokens,"
      "modeled_s,measured_s\np,0,0,0,1,100,0,0,0.011,abc\n");
  try {
    compare_e2e(d / "modeled", d / "measured");
    FAIL("no error");
  } catch (const kvsim::InputError& e) {
    CHECK(std::string(e.what()).find("iterations.csv:2: measured_s 'abc' is not a finite number") !=
          std::string::npos);
  }
  // A policy the modeled run does not have.
  make_folders();
  write(d / "modeled/requests.csv",
        std::string(kHeader) + "q,0,0,10,10,5,5,completed,0.1,0.01,0.5,0,0,0,0,0,0,0\n");
  CHECK_THROWS_WITH(compare_e2e(d / "modeled", d / "measured"),
                    Catch::Contains("no rows of policy 'p'"));
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The figure (scripts/kvsim_plot/e2e.py) from the same folders: drawn, captioned, and the same
// bytes when drawn again (pinned metadata, fixed style).
TEST_CASE("e2e figure: rendered and byte-identical", "[e2e_compare]") {
  const fs::path d = make_folders();
  write_e2e(compare_e2e(d / "modeled", d / "measured"), d);
  render_e2e_figure(d);
  REQUIRE(fs::exists(d / "e2e.png"));
  CHECK(slurp(d / "e2e.txt").find("source: e2e.json, measured/iterations.csv") !=
        std::string::npos);
  const std::string first = slurp(d / "e2e.png");
  render_e2e_figure(d);
  CHECK(slurp(d / "e2e.png") == first);
}
