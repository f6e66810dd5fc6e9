// The malformed-trace corpus: every file in tests/data/bad/traces/ must fail with exactly the
// one-line message in its .expected sidecar (the message after the file's path).
// KVSIM_UPDATE_GOLDEN=1 rewrites the sidecars; review the diff like code.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "tests/workloads/test_util.h"
#include "workloads/traces/trace_reader.h"

using namespace kvsim;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::string& path) {
  try {
    TraceOptions o;
    o.path = path;
    auto s = open_trace(o);
    while (s->next()) {
    }
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

TEST_CASE("every malformed trace fails with its expected one-line message", "[trace][corpus]") {
  const fs::path dir = kvsim::test::data_path("bad/traces");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".expected") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 20);
  const bool update = std::getenv("KVSIM_UPDATE_GOLDEN") != nullptr;
  for (const auto& f : files) {
    INFO(f.filename().string());
    const std::string got = error_of(f.string());
    REQUIRE(got.rfind(f.string(), 0) == 0);  // starts with the file's path
    REQUIRE(got.find('\n') == std::string::npos);
    const std::string tail = got.substr(f.string().size());
    fs::path sidecar = f;
    sidecar += ".expected";
    if (update) std::ofstream(sidecar, std::ios::binary) << tail << "\n";
    REQUIRE(fs::exists(sidecar));
    CHECK(tail == slurp(sidecar));
  }
}
