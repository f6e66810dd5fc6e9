// KV cache events: a block became findable in a tier, or stopped being findable. They follow
// vLLM's KV events (vllm/distributed/kv_events.py: BlockStored, BlockRemoved, each with the
// block's hash, its block_size and its medium), which the engine publishes for a router such as
// llm-d's precise prefix-cache scorer to index. kvsim keys a block as its tier does (the GPU
// prefix cache's hashed_block_key, block_keys.h; the offload tier's offload_block_key), and
// reports a key when it enters or leaves the tier's index: two GPU copies of one key are one
// findable block, as the router sees it.
#pragma once

#include <cstdint>
#include <functional>

namespace kvsim {

// The tier a block is in (vLLM's `medium`: "GPU", "CPU"; a disk store below them).
enum class KvMedium : uint8_t { kGpu = 0, kCpu = 1, kDisk = 2 };
inline constexpr int kKvMediums = 3;

struct KvBlockEvent {
  KvMedium medium = KvMedium::kGpu;
  bool removed = false;      // BlockRemoved; else BlockStored
  uint64_t key = 0;          // the tier's key of the block
  int64_t block_tokens = 0;  // tokens per block in that tier (the event's block_size)
};

// Where a tier sends its events; empty: nobody listens (the default, which costs nothing).
using KvEventSink = std::function<void(const KvBlockEvent&)>;

}  // namespace kvsim
