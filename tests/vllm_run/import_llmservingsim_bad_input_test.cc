// `kvsim-validate import llmservingsim` under bad input: a copy of the hand-written bundle
// (tests/data/llmservingsim/tiny) with one line changed. Each refusal is one line naming the
// file and line, and writes nothing into the output folder.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/errors.h"
#include "validate/vllm_run/import_llmservingsim.h"

using namespace kvsim;
using namespace kvsim::validate;
using Catch::Matchers::Contains;

namespace {

const std::filesystem::path kTinyBundle =
    std::filesystem::path(KVSIM_TEST_DATA) / "llmservingsim" / "tiny" / "bf16";

std::string slurp_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A copy of the bundle whose tp1/`file` has line `line` (1-based) replaced by `text` (or
// appended, past the end), and whose tp1/ folder is named `tp_folder`.
std::filesystem::path bundle_with(const std::string& file, int line, const std::string& text,
                                  const std::string& tp_folder = "tp1") {
  static int n = 0;
  const auto d = std::filesystem::temp_directory_path() /
                 ("kvsim-lss-bad-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d / tp_folder);
  std::filesystem::copy_file(kTinyBundle / "meta.yaml", d / "meta.yaml");
  for (const auto& f : std::filesystem::directory_iterator(kTinyBundle / "tp1")) {
    std::filesystem::copy_file(f.path(), d / tp_folder / f.path().filename());
  }
  if (file.empty()) return d;
  std::istringstream in(slurp_text(kTinyBundle / "tp1" / file));
  std::string out, l;
  int i = 0;
  while (std::getline(in, l)) out += (++i == line ? text : l) + "\n";
  if (line > i) out += text + "\n";
  std::ofstream(d / tp_folder / file) << out;
  return d;
}

// The import's one-line error; the output folder must stay empty.
std::string import_error(const std::filesystem::path& input) {
  const auto out = input / "out";
  LlmservingsimImportOptions o;
  o.input = input;
  o.out_dir = out;
  o.quiet = true;
  std::string e = "no error";
  try {
    run_import_llmservingsim(o);
  } catch (const InputError& x) {
    e = x.what();
  }
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK(e.find('\n') == std::string::npos);
  return e;
}

}  // namespace

TEST_CASE("import llmservingsim: token counts of 0, 1e30 or a fraction are refused at file:line",
          "[vllm_run][import][bad-input]") {
  CHECK_THAT(import_error(bundle_with("dense.csv", 2, "embedding,0,3.03")),
             Contains("tp1/dense.csv:2: column tokens: expected a whole count in [1, 2147483647], "
                      "got \"0\""));
  CHECK_THAT(import_error(bundle_with("dense.csv", 3, "embedding,1e30,3.06")),
             Contains("tp1/dense.csv:3: column tokens: expected a whole count"));
  CHECK_THAT(import_error(bundle_with("per_sequence.csv", 2, "lm_head,1.5,715.0")),
             Contains("tp1/per_sequence.csv:2: column sequences: expected a whole count"));
}

TEST_CASE("import llmservingsim: a 0 us mixed attention row is refused, not fitted to NaN",
          "[vllm_run][import][bad-input]") {
  // Line 10 is the first mixed row (a 16-token chunk with 2 decodes).
  CHECK_THAT(import_error(bundle_with("attention.csv", 10, "16,0,2,64,0")),
             Contains("tp1/attention.csv:10: column time_us: expected a positive time for a mixed "
                      "batch, got 0"));
}

TEST_CASE("import llmservingsim: a bad skew.csv or tpN folder writes nothing",
          "[vllm_run][import][bad-input]") {
  const auto b = bundle_with("", 0, "");
  std::ofstream(b / "tp1" / "skew.csv") << "n,pc,t_mean_us,t_skew_us\n4,0,10.0,x\n";
  CHECK_THAT(import_error(b), Contains("tp1/skew.csv:2: column t_skew_us: expected a number"));
  CHECK_THAT(import_error(bundle_with("", 0, "", "tpabc") / "tpabc"),
             Contains("/tpabc: expected a tpN folder"));
}
