#include "validate/replay/paged_attention.h"

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

void paged_chunk_attention(const PagedKvPool& pool, int layer, std::span<const int32_t> table,
                           const AttentionDims& d, int64_t kv_before, int64_t new_tokens,
                           const float* q, int64_t q_stride, float* out, int64_t out_stride,
                           AttentionScratch& s) {
  const int64_t D = d.head_dim;
  const int64_t group = d.heads / d.kv_heads;
  const int64_t context = kv_before + new_tokens;
  const int64_t bt = pool.block_tokens();
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int64_t tile_rows = std::min(kTileTokens, new_tokens) * group;
  grow_scratch(s.k, context * D);
  grow_scratch(s.v, context * D);
  grow_scratch(s.q, tile_rows * D);
  grow_scratch(s.scores, tile_rows * context);
  grow_scratch(s.out, tile_rows * D);
  for (int kvh = 0; kvh < d.kv_heads; ++kvh) {
    // Gather this KV head's context through the block table.
    for (int64_t b = 0; b * bt < context; ++b) {
      const int64_t n = std::min(bt, context - b * bt);
      const int32_t block = table[static_cast<size_t>(b)];
      std::memcpy(&s.k[static_cast<size_t>(b * bt * D)], pool.k_block(layer, block, kvh),
                  static_cast<size_t>(n * D) * sizeof(float));
      std::memcpy(&s.v[static_cast<size_t>(b * bt * D)], pool.v_block(layer, block, kvh),
                  static_cast<size_t>(n * D) * sizeof(float));
    }
    const Eigen::Map<const AttnMat> k(s.k.data(), context, D);
    const Eigen::Map<const AttnMat> v(s.v.data(), context, D);
    for (int64_t i0 = 0; i0 < new_tokens; i0 += kTileTokens) {
      const int64_t tokens = std::min(kTileTokens, new_tokens - i0);
      const int64_t rows = tokens * group;
      const int64_t keys = kv_before + i0 + tokens;  // the tile's last row sees this many
      // Row (i, g): query head kvh * group + g of token i0 + i.
      for (int64_t i = 0; i < tokens; ++i) {
        std::memcpy(&s.q[static_cast<size_t>(i * group * D)],
                    q + (i0 + i) * q_stride + kvh * group * D,
                    static_cast<size_t>(group * D) * sizeof(float));
      }
      const Eigen::Map<const AttnMat> qt(s.q.data(), rows, D);
      Eigen::Map<AttnMat> sc(s.scores.data(), rows, keys);
      sc.noalias() = (qt * k.topRows(keys).transpose()) * scale;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t visible = kv_before + i0 + r / group + 1;
        auto row = sc.row(r);
        const float mx = row.head(visible).maxCoeff();
        row.head(visible) = (row.head(visible).array() - mx).exp();
        row.head(visible) /= row.head(visible).sum();
        row.tail(keys - visible).setZero();
      }
      Eigen::Map<AttnMat> ot(s.out.data(), rows, D);
      ot.noalias() = sc * v.topRows(keys);
      for (int64_t i = 0; i < tokens; ++i) {
        std::memcpy(out + (i0 + i) * out_stride + kvh * group * D,
                    &s.out[static_cast<size_t>(i * group * D)],
                    static_cast<size_t>(group * D) * sizeof(float));
      }
    }
  }
}

}  // namespace kvsim::validate
