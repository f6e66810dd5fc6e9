// kvsim against published end-to-end latencies (tests/latency/data/published_e2e.csv): each row's
// figure within its tolerance. These are expectations, not fitted targets; docs/fidelity.md
// tabulates them before and after the tile model.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/data_path.h"
#include "tests/latency/latency_test_util.h"

using namespace kvsim;

namespace {

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char ch : line) {
    if (ch == '"') {
      quoted = !quoted;
    } else if (ch == ',' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

// TTFT: the prefill iteration of `batch` prompts of `input` tokens (engine overhead included).
// End to end: that, then output - 1 decode iterations whose contexts grow from input + 1.
double kvsim_ms(const LatencyModel& m, const std::string& what, int64_t batch, int64_t input,
                int64_t output) {
  BatchShape pre;
  pre.prefill.assign(static_cast<size_t>(batch), PrefillChunk{input, 0, true});
  double s = m.iteration(pre).seconds;
  if (what == "e2e") {
    for (int64_t g = 1; g < output; ++g) s += m.decode_step_seconds(batch, batch * (input + g));
  }
  return s * 1e3;
}

}  // namespace

TEST_CASE("batch-1 and batch-8 end-to-end latency stays near the published figures",
          "[latency][published]") {
  std::ifstream in(data_file("tests/latency/data/published_e2e.csv"));
  REQUIRE(in);
  std::string line;
  int rows = 0;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    const auto f = fields(line);
    REQUIRE(f.size() == 9);
    const LatencyModel m = kvsim::test::make_model(f[1], AttentionKind::kFlash, 0, 1, f[2]);
    const double got = kvsim_ms(m, f[0], std::stoll(f[3]), std::stoll(f[4]), std::stoll(f[5]));
    const double want = std::stod(f[6]);
    INFO(line << "\n  kvsim " << got << " ms, " << 100 * (got / want - 1) << "%");
    CHECK(std::abs(got / want - 1) <= std::stod(f[7]));
    ++rows;
  }
  CHECK(rows == 4);
}
