// Prefix-cache keys of paged blocks, shared by the paged stores: vLLM's block hashes
// (vllm/v1/core/kv_cache_utils.py, hash_block_tokens; Request.block_hashes) stood in for by the
// trace's prefix hashes (one per `prefix.block_tokens` prompt tokens) and, past them, by keys of
// the request's own (docs/memory.md "Prefix caching").
#pragma once

#include <algorithm>
#include <cstdint>

#include "models/memory/kv_store.h"

namespace kvsim {

// A 64-bit mix of `seed` and the block index `i`. 0 is reserved for "no key".
inline uint64_t mix_block_key(uint64_t seed, int64_t i) {
  uint64_t x = seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i + 1));
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x == 0 ? 1 : x;
}

// Key of block `i` of a request's own tokens (past its trace hashes): a mix of the owner, apart
// from any prompt hash (a collision is a 2^-64 event).
inline uint64_t own_block_key(int64_t owner, int64_t i) {
  return mix_block_key(
      0xd6e8feb86659fd93ULL * static_cast<uint64_t>(owner + 1) ^ 0x632be59bd9b4e019ULL, i);
}

// Key of block `i` from the trace's prefix hashes: the hash entry that covers the block's last
// token names the whole prefix up to there; mixing in `i` tells apart blocks inside one hash
// block. Requires: i < keyable_prefix_blocks(prefix, ..).
inline uint64_t hashed_block_key(const PrefixHashes& prefix, int64_t i, int64_t block_tokens) {
  const int64_t last_token = (i + 1) * block_tokens - 1;
  return mix_block_key(prefix.hashes[static_cast<size_t>(last_token / prefix.block_tokens)], i);
}

// Blocks of the prompt `prefix` describes that its hashes key: those that end inside the prompt
// (at most `limit` tokens when prefix.prompt_tokens is unset) and inside the hashes.
inline int64_t keyable_prefix_blocks(const PrefixHashes& prefix, int64_t limit,
                                     int64_t block_tokens) {
  if (prefix.block_tokens <= 0 || prefix.hashes.empty()) return 0;
  const int64_t prompt = prefix.prompt_tokens > 0 ? prefix.prompt_tokens : limit;
  const int64_t covered =
      std::min(prompt, static_cast<int64_t>(prefix.hashes.size()) * prefix.block_tokens);
  return covered / block_tokens;
}

}  // namespace kvsim
