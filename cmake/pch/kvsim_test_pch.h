// The test suites' precompiled headers: the libraries' set and Catch2's single header, which
// every test file includes (tests/CMakeLists.txt, kvsim_test_suite).
#pragma once

#include "cmake/pch/kvsim_pch.h"

#include <catch2/catch.hpp>
