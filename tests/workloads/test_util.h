// Helpers for the workloads tests: drain a source, write a temporary trace file.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "workloads/request_spec.h"

namespace kvsim::test {

inline std::vector<RequestSpec> drain(WorkloadSource& s) {
  std::vector<RequestSpec> out;
  while (auto r = s.next()) out.push_back(std::move(*r));
  return out;
}

inline std::string data_path(const std::string& rel) {
  return std::string(KVSIM_TEST_DATA) + "/" + rel;
}
inline std::string source_path(const std::string& rel) {
  return std::string(KVSIM_SOURCE_DIR) + "/" + rel;
}

// A file under this process's temp folder holding `body` exactly; returns its path. ctest runs
// each test case as its own process, in parallel: a folder shared between processes lets one
// case read the file another case has just rewritten under the same name.
inline std::string temp_file(const std::string& name, const std::string& body) {
  auto dir = std::filesystem::temp_directory_path() /
             ("kvsim_workloads_tests-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto p = dir / name;
  std::ofstream(p, std::ios::binary) << body;
  return p.string();
}

}  // namespace kvsim::test
