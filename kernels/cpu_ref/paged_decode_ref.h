// CPU paged decode attention: one new query token per sequence attends to its whole context,
// stored in blocks of block_size tokens that a block table scatters over the cache (vLLM's
// layout, kernels/cpu_ref/shapes.h). The reference gathers the blocks back into contiguous K/V
// and runs attention_reference, so the block-table indexing is checked, not assumed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu_ref/precision.h"
#include "kernels/cpu_ref/random_inputs.h"
#include "kernels/cpu_ref/shapes.h"

namespace kvsim::kernels {

// A block table that gives every sequence blocks_per_seq distinct blocks in a shuffled order, so
// neighbouring logical blocks are never neighbours in memory.
std::vector<int32_t> shuffled_block_table(const PagedDecodeShape& s, InputRng& rng);

// Contiguous [batch, kv_heads, context, head_dim] copy of one cache through the block table.
std::vector<float> gather_paged(const PagedDecodeShape& s, std::span<const float> cache,
                                std::span<const int32_t> block_table);

// Reference: gather, then attention_reference with seq_q = 1.
void paged_decode_reference(const PagedDecodeShape& s, std::span<const float> q,
                            std::span<const float> k_cache, std::span<const float> v_cache,
                            std::span<const int32_t> block_table, std::span<float> o);

// The CPU backend's kernel: walks the block table directly with an online softmax per query
// head in float, output rounded to `p`.
void paged_decode_cpu(const PagedDecodeShape& s, Precision p, std::span<const float> q,
                      std::span<const float> k_cache, std::span<const float> v_cache,
                      std::span<const int32_t> block_table, std::span<float> o);

}  // namespace kvsim::kernels
