// What the three KV stores share: the reservation rule, the live/reservation token sums behind
// usage(), and checked lookups of a held request. One definition, so the stores cannot drift
// apart in what "reservation" or "internal" means (kv_store.h defines the waste categories).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/check.h"
#include "core/units.h"
#include "models/memory/kv_store.h"

namespace kvsim {

// Tokens a request holding `tokens` in space for `capacity_tokens` may still produce there, up to
// its `max_total` tokens: its reservation. The rest of the space beyond `tokens` is internal.
inline int64_t reservation_tokens(int64_t tokens, int64_t capacity_tokens, int64_t max_total) {
  return std::max<int64_t>(0, std::min(capacity_tokens, max_total) - tokens);
}

// Live and reservation token sums over the held requests, kept by adding (sign +1) and removing
// (sign -1) each request's figures as it changes.
struct TokenSums {
  int64_t live = 0;
  int64_t reservation = 0;

  void account(int64_t tokens, int64_t capacity_tokens, int64_t max_total, int sign) {
    live += sign * tokens;
    reservation += sign * reservation_tokens(tokens, capacity_tokens, max_total);
  }
  bool operator==(const TokenSums&) const = default;
};

// The usage figures that follow from the token sums and the bytes held: live, reservation, held,
// and internal = held - live - reservation. The store fills capacity, free, external, requests.
inline KvUsage held_usage(int64_t live_tokens, int64_t reservation_tokens_sum,
                          int64_t bytes_per_token, int64_t held_bytes) {
  KvUsage u;
  u.live_bytes = live_tokens * bytes_per_token;
  u.reservation_bytes = reservation_tokens_sum * bytes_per_token;
  u.held_bytes = held_bytes;
  u.internal_bytes = held_bytes - u.live_bytes - u.reservation_bytes;
  return u;
}

// A paged allocation of `blocks` blocks that the `free_blocks` free ones cannot serve. The bytes
// it wanted saturate: a request longer than any pool (a billion tokens of a huge model) must not
// overflow while saying so.
inline AllocResult paged_capacity_failure(int64_t blocks, int64_t free_blocks,
                                          int64_t block_bytes) {
  return AllocResult::failure(
      OomReason::kCapacity,
      checked_mul(blocks, block_bytes).value_or(std::numeric_limits<int64_t>::max()),
      free_blocks * block_bytes, free_blocks > 0 ? block_bytes : 0);
}

// The record of `request` in `requests` (a map by request id). KVSIM_CHECKs that it is held;
// `op` names the operation for the message.
template <class Map>
auto& held_request(Map& requests, RequestId request, const char* op) {
  auto it = requests.find(request);
  KVSIM_CHECK(it != requests.end(), "{}: request {} holds no KV", op, request);
  return it->second;
}

}  // namespace kvsim
