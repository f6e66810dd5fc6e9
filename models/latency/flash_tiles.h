// Prefill and mixed attention as FlashAttention-2's varlen kernel tiles them (vLLM's
// FlashAttention backend, `vllm/v1/attention/backends/flash_attn.py` FlashAttentionImpl.forward,
// calls vllm_flash_attn's flash_attn_varlen_func with the paged KV's block table; FA2's
// mha_varlen_fwd, csrc/flash_attn/flash_api.cpp, then calls run_mha_fwd(params, stream,
// paged_KV), which forces the split-KV kernel with one split, `run_mha_fwd_splitkv_dispatch` in
// csrc/flash_attn/src/flash_fwd_launch_template.h: kBlockM = 64 query rows for every head
// dimension, kBlockN = 256 keys for head_dim <= 64, 128 for <= 128, 64 above).
//
// Each CTA owns one head and one block of kBlockM query rows of one sequence and walks the KV
// tiles its rows can see (causal: up to its last row); it computes whole tiles however few of its
// rows are real, so a 16-token chunk pays for 64 rows, and a decode in a mixed batch (one query
// row, no GQA packing: that happens only when every query is one token) pays a whole tile per KV
// block. FA2 splits the KV of a sequence over CTAs (set_params_splitkv) only on the path that
// swaps a KV group's query heads into the rows, taken when max_seqlen_q is 1 (decode-only), so
// in a varlen batch each CTA walks all of its KV. The CTAs run one per SM (the 64 x 128 tile's
// shared memory leaves room for one on the GPUs profiled), in waves; a wave lasts as long as its
// longest CTA. Used by Costing::prefill_attention when the profile has a fitted `flash_tiles`
// section.
#pragma once

#include <cstdint>
#include <vector>

#include "models/latency/latency_model.h"

namespace kvsim {

inline constexpr int kFlashBlockM = 64;
// KV rows per tile for a head dimension (FA2's split-KV dispatch).
int flash_block_n(double head_dim);

// The CTAs of one varlen launch, per layer.
struct FlashTileWork {
  double ctas = 0;         // heads x (query blocks of every chunk + one per decode)
  double waves = 0;        // ceil(ctas / SMs)
  double wave_blocks = 0;  // sum over waves of the KV tiles of the wave's longest CTA
};

// The tiles of a varlen batch: `chunks` (causal, each after its cached context) and `n_decode`
// decodes of `decode_context` tokens each (their mean: kvsim's decode cost depends on the
// context sum only), `heads` query heads on this GPU, `sms` SMs, `window` > 0 a sliding window.
// CTAs are placed longest first, as a greedy scheduler would.
// Requires: heads >= 1, sms >= 1.
FlashTileWork flash_tile_work(const std::vector<PrefillChunk>& chunks, double n_decode,
                              double decode_context, double heads, double head_dim, int sms,
                              double window);

}  // namespace kvsim
