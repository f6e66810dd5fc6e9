#include "kernels/cpu_ref/paged_decode_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/check.h"
#include "kernels/cpu_ref/attention_ref.h"

namespace kvsim::kernels {

namespace {

void check_sizes(const PagedDecodeShape& s, size_t q, size_t k, size_t v, size_t table, size_t o) {
  s.validate();
  const auto qe = static_cast<size_t>(s.batch * s.heads * s.head_dim);
  const auto ce = static_cast<size_t>(s.cache_elements());
  const auto te = static_cast<size_t>(s.batch * s.blocks_per_seq());
  KVSIM_CHECK(q == qe && o == qe && k == ce && v == ce && table == te,
              "paged decode {}: buffers q={} k={} v={} table={} o={}, expected {} {} {}",
              s.describe(), q, k, v, table, o, qe, ce, te);
}

// Offset of token t of KV head kvh of sequence b in a cache.
size_t token_offset(const PagedDecodeShape& s, std::span<const int32_t> table, int64_t b,
                    int64_t kvh, int64_t t) {
  const int64_t block = table[static_cast<size_t>(b * s.blocks_per_seq() + t / s.block_size)];
  return static_cast<size_t>(((block * s.kv_heads + kvh) * s.block_size + t % s.block_size) *
                             s.head_dim);
}

}  // namespace

std::vector<int32_t> shuffled_block_table(const PagedDecodeShape& s, InputRng& rng) {
  std::vector<int32_t> table(static_cast<size_t>(s.num_blocks()));
  std::iota(table.begin(), table.end(), 0);
  for (size_t i = table.size(); i > 1; --i) {  // Fisher-Yates with our own generator
    std::swap(table[i - 1], table[static_cast<size_t>(rng.below(static_cast<int64_t>(i)))]);
  }
  return table;
}

std::vector<float> gather_paged(const PagedDecodeShape& s, std::span<const float> cache,
                                std::span<const int32_t> block_table) {
  std::vector<float> out(static_cast<size_t>(s.batch * s.kv_heads * s.context * s.head_dim));
  size_t pos = 0;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t kvh = 0; kvh < s.kv_heads; ++kvh) {
      for (int64_t t = 0; t < s.context; ++t) {
        const size_t off = token_offset(s, block_table, b, kvh, t);
        std::copy_n(&cache[off], s.head_dim, &out[pos]);
        pos += static_cast<size_t>(s.head_dim);
      }
    }
  }
  return out;
}

void paged_decode_reference(const PagedDecodeShape& s, std::span<const float> q,
                            std::span<const float> k_cache, std::span<const float> v_cache,
                            std::span<const int32_t> block_table, std::span<float> o) {
  check_sizes(s, q.size(), k_cache.size(), v_cache.size(), block_table.size(), o.size());
  const std::vector<float> k = gather_paged(s, k_cache, block_table);
  const std::vector<float> v = gather_paged(s, v_cache, block_table);
  const AttentionShape a{.batch = s.batch,
                         .heads = s.heads,
                         .kv_heads = s.kv_heads,
                         .seq_q = 1,
                         .seq_kv = s.context,
                         .head_dim = s.head_dim,
                         .causal = false};
  attention_reference(a, q, k, v, o);
}

void paged_decode_cpu(const PagedDecodeShape& s, Precision p, std::span<const float> q,
                      std::span<const float> k_cache, std::span<const float> v_cache,
                      std::span<const int32_t> block_table, std::span<float> o) {
  check_sizes(s, q.size(), k_cache.size(), v_cache.size(), block_table.size(), o.size());
  const int64_t d = s.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> acc(static_cast<size_t>(d));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kvh = h / s.group();
      const float* qh = &q[static_cast<size_t>((b * s.heads + h) * d)];
      float m = -std::numeric_limits<float>::infinity();
      float l = 0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t t = 0; t < s.context; ++t) {
        const size_t off = token_offset(s, block_table, b, kvh, t);
        float dot = 0;
        for (int64_t x = 0; x < d; ++x) dot += qh[x] * k_cache[off + static_cast<size_t>(x)];
        const float sc = dot * scale;
        const float m_new = std::max(m, sc);
        const float alpha = std::exp(m - m_new);
        const float pt = std::exp(sc - m_new);
        for (int64_t x = 0; x < d; ++x)
          acc[x] = acc[x] * alpha + pt * v_cache[off + static_cast<size_t>(x)];
        l = l * alpha + pt;
        m = m_new;
      }
      float* oh = &o[static_cast<size_t>((b * s.heads + h) * d)];
      for (int64_t x = 0; x < d; ++x) oh[x] = round_to(p, acc[x] / l);
    }
  }
}

}  // namespace kvsim::kernels
