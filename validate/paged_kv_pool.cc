#include "validate/paged_kv_pool.h"

#include <fmt/format.h>

#include <numeric>

#include "core/check.h"
#include "core/errors.h"
#include "kernels/cpu_ref/random_inputs.h"

namespace kvsim::validate {

int64_t PagedKvPool::bytes_for(const ModelSpec& m, int block_tokens, int64_t num_blocks) {
  // K and V, float32. Divided before multiplying so a huge num_blocks cannot overflow.
  const int64_t per_block =
      2 * int64_t{m.layers} * m.kv_heads * int64_t{block_tokens} * m.head_dim * 4;
  if (per_block > 0 && num_blocks > INT64_MAX / per_block) return INT64_MAX;
  return per_block * num_blocks;
}

PagedKvPool::PagedKvPool(const ModelSpec& m, int block_tokens, int64_t num_blocks, uint64_t seed)
    : layers_(m.layers),
      kv_heads_(m.kv_heads),
      head_dim_(m.head_dim),
      block_tokens_(block_tokens),
      num_blocks_(num_blocks) {
  if (block_tokens < 1 || num_blocks < 1 || num_blocks > INT32_MAX) {
    throw InputError(
        fmt::format("cpu forward: the KV pool needs block_tokens >= 1 and 1 to {} "
                    "blocks, got {} and {}",
                    INT32_MAX, block_tokens, num_blocks));
  }
  const int64_t bytes = bytes_for(m, block_tokens, num_blocks);
  if (bytes > kMaxCpuPoolBytes) {
    throw InputError(
        fmt::format("cpu forward: the KV pool of {} blocks x {} tokens asks for {} "
                    "bytes of float32 K and V, over the {} bytes (8 GiB) allowed",
                    num_blocks, block_tokens, bytes, kMaxCpuPoolBytes));
  }
  const auto floats = static_cast<size_t>(bytes / 8);  // per cache: half the bytes, 4 per float
  k_.assign(floats, 0.0f);
  v_.assign(floats, 0.0f);
  free_.resize(static_cast<size_t>(num_blocks));
  std::iota(free_.begin(), free_.end(), 0);
  kernels::InputRng rng(seed ^ 0x5eedb10cull);
  for (int64_t i = num_blocks - 1; i > 0; --i) {  // Fisher-Yates
    std::swap(free_[static_cast<size_t>(i)], free_[static_cast<size_t>(rng.below(i + 1))]);
  }
}

void PagedKvPool::reserve(int64_t id, int64_t tokens) {
  Entry& e = seqs_[id];
  const int64_t need = (tokens + block_tokens_ - 1) / block_tokens_;
  while (static_cast<int64_t>(e.blocks.size()) < need) {
    if (free_.empty()) {
      throw InvariantError(fmt::format(
          "cpu forward: the KV pool ran out of blocks for request {} ({} tokens need {} blocks, "
          "it holds {}; all {} blocks are in use): the engine's store and the pool disagree",
          id, tokens, need, e.blocks.size(), num_blocks_));
    }
    e.blocks.push_back(free_.back());
    free_.pop_back();
  }
}

void PagedKvPool::release(int64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  // Back in reverse, so the next request gets them in the order this one had them.
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) free_.push_back(*b);
  seqs_.erase(it);
}

void PagedKvPool::release_all() {
  while (!seqs_.empty()) release(seqs_.begin()->first);
}

int64_t PagedKvPool::filled(int64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? 0 : it->second.filled;
}

void PagedKvPool::set_filled(int64_t id, int64_t tokens) { seqs_[id].filled = tokens; }

std::span<const int32_t> PagedKvPool::block_table(int64_t id) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return {};
  return it->second.blocks;
}

size_t PagedKvPool::offset(int layer, int32_t block, int kv_head, int64_t slot) const {
  return static_cast<size_t>(
      (((int64_t{layer} * num_blocks_ + block) * kv_heads_ + kv_head) * block_tokens_ + slot) *
      head_dim_);
}

float* PagedKvPool::k_at(int layer, std::span<const int32_t> table, int64_t position, int kv_head) {
  return &k_[offset(layer, table[static_cast<size_t>(position / block_tokens_)], kv_head,
                    position % block_tokens_)];
}

float* PagedKvPool::v_at(int layer, std::span<const int32_t> table, int64_t position, int kv_head) {
  return &v_[offset(layer, table[static_cast<size_t>(position / block_tokens_)], kv_head,
                    position % block_tokens_)];
}

const float* PagedKvPool::k_block(int layer, int32_t block, int kv_head) const {
  return &k_[offset(layer, block, kv_head, 0)];
}

const float* PagedKvPool::v_block(int layer, int32_t block, int kv_head) const {
  return &v_[offset(layer, block, kv_head, 0)];
}

}  // namespace kvsim::validate
