#include "validate/paged_attention.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvsim::validate {

namespace {

using AttnMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Query tokens per tile: the keys computed past a row's mask are at most this many.
constexpr int64_t kTileTokens = 64;

void grow_scratch(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

}  // namespace

void gather_kv_head(const float* k_cache, const float* v_cache, int kv_heads, int64_t block_tokens,
                    int64_t head_dim, std::span<const int32_t> table, int64_t context, int kv_head,
                    AttentionScratch& s) {
  const int64_t D = head_dim;
  const int64_t bt = block_tokens;
  grow_scratch(s.k, context * D);
  grow_scratch(s.v, context * D);
  for (int64_t b = 0; b * bt < context; ++b) {
    const int64_t n = std::min(bt, context - b * bt);
    const int64_t block = table[static_cast<size_t>(b)];
    const int64_t at = ((block * kv_heads) + kv_head) * bt * D;
    std::memcpy(&s.k[static_cast<size_t>(b * bt * D)], k_cache + at,
                static_cast<size_t>(n * D) * sizeof(float));
    std::memcpy(&s.v[static_cast<size_t>(b * bt * D)], v_cache + at,
                static_cast<size_t>(n * D) * sizeof(float));
  }
}

void kv_head_attention(const float* k_data, const float* v_data, int64_t kv_before,
                       int64_t new_tokens, int64_t group, int64_t head_dim, bool causal,
                       const float* q, HeadRows q_rows, float* out, HeadRows out_rows,
                       AttentionScratch& s) {
  const int64_t D = head_dim;
  const int64_t context = kv_before + new_tokens;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int64_t tile_rows = std::min(kTileTokens, new_tokens) * group;
  grow_scratch(s.q, tile_rows * D);
  grow_scratch(s.scores, tile_rows * context);
  grow_scratch(s.out, tile_rows * D);
  const Eigen::Map<const AttnMat> k(k_data, context, D);
  const Eigen::Map<const AttnMat> v(v_data, context, D);
  const auto row_bytes = static_cast<size_t>(D) * sizeof(float);
  for (int64_t i0 = 0; i0 < new_tokens; i0 += kTileTokens) {
    const int64_t tokens = std::min(kTileTokens, new_tokens - i0);
    const int64_t rows = tokens * group;
    // The tile's last row sees this many keys (all of them without the causal mask).
    const int64_t keys = causal ? kv_before + i0 + tokens : context;
    // Row (i, g): query head g of the group, token i0 + i.
    for (int64_t i = 0; i < tokens; ++i) {
      for (int64_t g = 0; g < group; ++g) {
        std::memcpy(&s.q[static_cast<size_t>((i * group + g) * D)],
                    q + (i0 + i) * q_rows.token_stride + g * q_rows.head_stride, row_bytes);
      }
    }
    const Eigen::Map<const AttnMat> qt(s.q.data(), rows, D);
    Eigen::Map<AttnMat> sc(s.scores.data(), rows, keys);
    sc.noalias() = (qt * k.topRows(keys).transpose()) * scale;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t visible = causal ? kv_before + i0 + r / group + 1 : context;
      auto row = sc.row(r);
      const float mx = row.head(visible).maxCoeff();
      row.head(visible) = (row.head(visible).array() - mx).exp();
      row.head(visible) /= row.head(visible).sum();
      row.tail(keys - visible).setZero();
    }
    Eigen::Map<AttnMat> ot(s.out.data(), rows, D);
    ot.noalias() = sc * v.topRows(keys);
    for (int64_t i = 0; i < tokens; ++i) {
      for (int64_t g = 0; g < group; ++g) {
        std::memcpy(out + (i0 + i) * out_rows.token_stride + g * out_rows.head_stride,
                    &s.out[static_cast<size_t>((i * group + g) * D)], row_bytes);
      }
    }
  }
}

void paged_chunk_attention(const PagedKvPool& pool, int layer, std::span<const int32_t> table,
                           const AttentionDims& d, int64_t kv_before, int64_t new_tokens,
                           const float* q, int64_t q_stride, float* out, int64_t out_stride,
                           AttentionScratch& s) {
  const int64_t D = d.head_dim;
  const int64_t group = d.heads / d.kv_heads;
  const int64_t context = kv_before + new_tokens;
  for (int kvh = 0; kvh < d.kv_heads; ++kvh) {
    gather_kv_head(pool.k_layer(layer), pool.v_layer(layer), d.kv_heads, pool.block_tokens(), D,
                   table, context, kvh, s);
    // Query and output rows are [token, heads, head_dim]: this KV head's group starts at
    // kvh * group heads.
    kv_head_attention(s.k.data(), s.v.data(), kv_before, new_tokens, group, D, /*causal=*/true,
                      q + kvh * group * D, HeadRows{q_stride, D}, out + kvh * group * D,
                      HeadRows{out_stride, D}, s);
  }
}

}  // namespace kvsim::validate
