// The docs' tables of registered types against the registries: every registered name has a row,
// every row names a registered type, and every key an entry accepts is in its row. Adding a guard,
// KV store, trace format, arrival process or length distribution without documenting it (or
// documenting one that does not exist, or dropping a key) fails here with the table and name.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "models/memory/kv_store_registry.h"
#include "sim/cluster/router.h"
#include "sim/guards/guard_registry.h"
#include "sim/serving/scheduler.h"
#include "workloads/generators/open_loop.h"
#include "workloads/lengths.h"
#include "workloads/traces/trace_formats.h"

using namespace kvsim;

namespace {

std::string read_doc(const std::string& relative) {
  std::ifstream in(std::string(KVSIM_SOURCE_DIR) + "/" + relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string strip(std::string s) {
  const auto a = s.find_first_not_of(" \t");
  const auto b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The rows of the markdown table in `doc` whose header line starts with `header`: first cell
// (backticks removed) -> the whole row's text.
std::map<std::string, std::string> table_rows(const std::string& doc, const std::string& header) {
  std::map<std::string, std::string> rows;
  std::istringstream in(read_doc(doc));
  std::string line;
  bool in_table = false;
  int skip = 0;
  while (std::getline(in, line)) {
    if (!in_table) {
      if (line.rfind(header, 0) == 0) {
        in_table = true;
        skip = 1;  // the |---| line
      }
      continue;
    }
    if (line.empty() || line[0] != '|') break;
    if (skip-- > 0) continue;
    std::string first = line.substr(1, line.find('|', 1) - 1);
    first.erase(std::remove(first.begin(), first.end(), '`'), first.end());
    rows[strip(first)] = line;
  }
  INFO(doc << ": table '" << header << "'");
  REQUIRE(in_table);
  return rows;
}

// Names both ways, and each entry's keys in its row (`quoted` or, for columns, as written).
template <class F>
void check_table(const Registry<F>& registry, const std::string& doc, const std::string& header,
                 bool backticked_keys) {
  const auto rows = table_rows(doc, header);
  std::set<std::string> documented;
  for (const auto& [name, row] : rows) documented.insert(name);
  const auto names = registry.names();
  CHECK(documented == std::set<std::string>(names.begin(), names.end()));
  for (const auto& e : registry.entries()) {
    auto it = rows.find(e.name);
    if (it == rows.end()) continue;  // reported above
    for (const auto& key : e.keys) {
      INFO(doc << ": " << registry.concept_name() << " '" << e.name << "' key " << key);
      CHECK(it->second.find(backticked_keys ? "`" + key + "`" : key) != std::string::npos);
    }
  }
}

}  // namespace

TEST_CASE("the README's guard table lists every registered guard and its keys",
          "[contract][docs]") {
  check_table(guard_registry(), "README.md", "| type | parameters | what it does |", true);
}

TEST_CASE("docs/cluster.md's router table lists every registered router and its keys",
          "[contract][docs]") {
  check_table(router_registry(), "docs/cluster.md", "| router | keys | what it does |", true);
}

TEST_CASE("docs/metrics.md's scheduler table lists every registered scheduler and its keys",
          "[contract][docs]") {
  check_table(scheduler_registry(), "docs/metrics.md", "| scheduler | keys | what it does |", true);
}

TEST_CASE("docs/memory.md's KV store table lists every store, its keys and capabilities",
          "[contract][docs]") {
  check_table(kv_store_registry(), "docs/memory.md", "| type | keys | provides |", true);
  const auto rows = table_rows("docs/memory.md", "| type | keys | provides |");
  for (const auto& e : kv_store_registry().entries()) {
    INFO("KV store " << e.name);
    REQUIRE(rows.count(e.name));
    const std::string row = rows.at(e.name);
    const std::string last = strip(row.substr(row.rfind('|', row.size() - 2) + 1,
                                              row.size() - row.rfind('|', row.size() - 2) - 2));
    CHECK(last == kv_capability_list(e.make.provides));
  }
}

TEST_CASE("docs/workloads.md's tables list every trace format, arrival process and length type",
          "[contract][docs]") {
  check_table(trace_format_registry(), "docs/workloads.md", "| format | first line / columns",
              false);
  check_table(arrival_process_registry(), "docs/workloads.md", "| arrivals type | keys |", true);
  check_table(length_dist_registry(), "docs/workloads.md", "| type | keys | sample |", true);
}
