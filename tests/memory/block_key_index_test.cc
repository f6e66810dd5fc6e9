// BlockKeyIndex (models/memory/block_key_index.h): the open-addressing prefix-key index. Room for
// 4 keys is a table of 8 slots; a key's home slot is the top 3 bits of key x 0x9E3779B97F4A7C15
// (worked out by hand: keys 8, 16 and 21 go home to slot 7, key 5 to slot 0, key 2 to slot 1).
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "models/memory/block_key_index.h"

using namespace kvsim;

namespace {

std::vector<uint64_t> key_index_order(const BlockKeyIndex& index) {
  std::vector<uint64_t> keys;
  index.for_each([&](uint64_t key, int32_t) { keys.push_back(key); });
  return keys;
}

}  // namespace

// 8 -> slot 7; 16 (home 7) wraps to slot 0; 5 (home 0) probes to 1; 21 (home 7) to 2.
TEST_CASE("colliding keys probe past their home slot and wrap around", "[memory][block_pool]") {
  BlockKeyIndex index(4);
  CHECK(index.find(8) == nullptr);  // nothing allocated yet
  for (const auto& [key, value] :
       std::vector<std::pair<uint64_t, int32_t>>{{8, 80}, {16, 160}, {5, 50}, {21, 210}}) {
    CHECK(index.try_emplace(key, value).second);
  }
  CHECK(key_index_order(index) == std::vector<uint64_t>{16, 5, 21, 8});
  const auto again = index.try_emplace(16, 999);
  CHECK_FALSE(again.second);
  CHECK(*again.first == 160);
  CHECK(*index.find(21) == 210);
  CHECK(index.find(13) == nullptr);  // home 0: probes 0, 1, 2 and stops at the empty slot 3
  CHECK(index.size() == 4);
}

// Erasing 8 at slot 7 leaves a hole the run behind it fills: 16 (home 7) moves to 7, 5 (home 0)
// to 0, 21 (home 7) to 1; slot 2 is empty again.
TEST_CASE("erasing shifts the probe run back over the hole", "[memory][block_pool]") {
  BlockKeyIndex index(4);
  for (const uint64_t key : {8, 16, 5, 21}) index.try_emplace(key, static_cast<int32_t>(key));
  index.erase(8);
  CHECK(key_index_order(index) == std::vector<uint64_t>{5, 21, 16});
  CHECK(index.find(8) == nullptr);
  CHECK(*index.find(16) == 16);
  CHECK(*index.find(5) == 5);
  CHECK(*index.find(21) == 21);
  CHECK(index.size() == 3);
}

// 5 at its home 0, 2 at its home 1: erasing 5 must not move 2 before its home (it would no
// longer be found).
TEST_CASE("an entry at its home slot stays when the hole is before it", "[memory][block_pool]") {
  BlockKeyIndex index(4);
  index.try_emplace(5, 5);
  index.try_emplace(2, 2);
  index.erase(5);
  CHECK(key_index_order(index) == std::vector<uint64_t>{2});
  CHECK(*index.find(2) == 2);
}

// Random churn at full load (as many keys as blocks) against std::unordered_map.
TEST_CASE("the index agrees with std::unordered_map under churn", "[memory][block_pool]") {
  constexpr int64_t kMax = 1000;
  BlockKeyIndex index(kMax);
  std::unordered_map<uint64_t, int32_t> oracle;
  std::mt19937_64 rng(7);
  std::vector<uint64_t> keys;
  for (int step = 0; step < 200000; ++step) {
    const bool insert = keys.empty() || (static_cast<int64_t>(keys.size()) < kMax && rng() % 2);
    if (insert) {
      const uint64_t key = rng() % 5000 + 1;  // small range: repeats and collisions
      const auto [value, fresh] = index.try_emplace(key, step);
      const auto [it, oracle_fresh] = oracle.try_emplace(key, step);
      REQUIRE(fresh == oracle_fresh);
      REQUIRE(*value == it->second);
      if (fresh) keys.push_back(key);
    } else {
      const size_t i = rng() % keys.size();
      index.erase(keys[i]);
      oracle.erase(keys[i]);
      keys[i] = keys.back();
      keys.pop_back();
    }
    const uint64_t probe = rng() % 5000 + 1;
    const int32_t* found = index.find(probe);
    const auto it = oracle.find(probe);
    REQUIRE((found == nullptr) == (it == oracle.end()));
    if (found) REQUIRE(*found == it->second);
  }
  CHECK(index.size() == static_cast<int64_t>(oracle.size()));
}
