// The headers that nearly every kvsim translation unit parses: the standard library's containers
// and streams, fmt, nlohmann-json, yaml-cpp and spdlog. Compiled once per build tree and reused by
// every library and program (the top-level CMakeLists.txt, KVSIM_PCH); a source file still
// includes what it uses, so a build without KVSIM_PCH compiles the same code.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>
