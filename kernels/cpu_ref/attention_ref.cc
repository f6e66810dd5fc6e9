#include "kernels/cpu_ref/attention_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"

namespace kvsim::kernels {

namespace {

void check_sizes(const AttentionShape& s, size_t q, size_t k, size_t v, size_t o) {
  s.validate();
  const auto qe = static_cast<size_t>(s.q_elements());
  const auto ke = static_cast<size_t>(s.kv_elements());
  KVSIM_CHECK(q == qe && o == qe && k == ke && v == ke,
              "attention {}: buffers q={} k={} v={} o={} elements, expected {} and {}",
              s.describe(), q, k, v, o, qe, ke);
}

// Keys [0, visible) are unmasked for query row i.
int64_t visible_keys(const AttentionShape& s, int64_t i) {
  return s.causal ? std::min(s.seq_kv, i + 1 + (s.seq_kv - s.seq_q)) : s.seq_kv;
}

// Offsets of head h's Q/O rows and of its KV head's K/V rows.
struct HeadView {
  size_t q;
  size_t kv;
};
HeadView head_view(const AttentionShape& s, int64_t b, int64_t h) {
  const int64_t kvh = h / s.group();
  return {static_cast<size_t>(((b * s.heads + h) * s.seq_q) * s.head_dim),
          static_cast<size_t>(((b * s.kv_heads + kvh) * s.seq_kv) * s.head_dim)};
}

}  // namespace

void attention_reference(const AttentionShape& s, std::span<const float> q,
                         std::span<const float> k, std::span<const float> v, std::span<float> o) {
  check_sizes(s, q.size(), k.size(), v.size(), o.size());
  const int64_t d = s.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> score(static_cast<size_t>(s.seq_kv));
  std::vector<double> acc(static_cast<size_t>(d));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const HeadView hv = head_view(s, b, h);
      for (int64_t i = 0; i < s.seq_q; ++i) {
        const float* qi = &q[hv.q + static_cast<size_t>(i * d)];
        const int64_t n = visible_keys(s, i);
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n; ++j) {
          const float* kj = &k[hv.kv + static_cast<size_t>(j * d)];
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(qi[c]) * kj[c];
          score[j] = dot * scale;
          mx = std::max(mx, score[j]);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < n; ++j) {
          const double pj = std::exp(score[j] - mx);
          sum += pj;
          const float* vj = &v[hv.kv + static_cast<size_t>(j * d)];
          for (int64_t c = 0; c < d; ++c) acc[c] += pj * vj[c];
        }
        float* oi = &o[hv.q + static_cast<size_t>(i * d)];
        for (int64_t c = 0; c < d; ++c) oi[c] = static_cast<float>(acc[c] / sum);
      }
    }
  }
}

int64_t native_attention_workspace_bytes(const AttentionShape& s, Precision p) {
  return s.batch * s.heads * s.seq_q * s.seq_kv * precision_bytes(p);
}

int64_t native_attention_cpu(const AttentionShape& s, Precision p, std::span<const float> q,
                             std::span<const float> k, std::span<const float> v,
                             std::span<float> o) {
  check_sizes(s, q.size(), k.size(), v.size(), o.size());
  const int64_t d = s.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // The whole score matrix, as an unfused framework materialises it (one pass writes it, softmax
  // reads and rewrites it, PV reads it).
  std::vector<float> scores(static_cast<size_t>(s.batch * s.heads * s.seq_q * s.seq_kv));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const HeadView hv = head_view(s, b, h);
      float* sh = &scores[static_cast<size_t>((b * s.heads + h) * s.seq_q * s.seq_kv)];
      for (int64_t i = 0; i < s.seq_q; ++i) {  // QK^T (the GEMM computes every pair)
        const float* qi = &q[hv.q + static_cast<size_t>(i * d)];
        for (int64_t j = 0; j < s.seq_kv; ++j) {
          const float* kj = &k[hv.kv + static_cast<size_t>(j * d)];
          float dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += qi[c] * kj[c];
          sh[i * s.seq_kv + j] = round_to(p, dot * scale);
        }
      }
      for (int64_t i = 0; i < s.seq_q; ++i) {  // softmax in place, masked keys become 0
        float* row = sh + i * s.seq_kv;
        const int64_t n = visible_keys(s, i);
        const float mx = *std::max_element(row, row + n);
        float sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += std::exp(row[j] - mx);
        for (int64_t j = 0; j < s.seq_kv; ++j) {
          row[j] = j < n ? round_to(p, std::exp(row[j] - mx) / sum) : 0.0f;
        }
      }
      for (int64_t i = 0; i < s.seq_q; ++i) {  // PV
        float* oi = &o[hv.q + static_cast<size_t>(i * d)];
        std::fill(oi, oi + d, 0.0f);
        for (int64_t j = 0; j < s.seq_kv; ++j) {
          const float pj = sh[i * s.seq_kv + j];
          const float* vj = &v[hv.kv + static_cast<size_t>(j * d)];
          for (int64_t c = 0; c < d; ++c) oi[c] += pj * vj[c];
        }
        for (int64_t c = 0; c < d; ++c) oi[c] = round_to(p, oi[c]);
      }
    }
  }
  return native_attention_workspace_bytes(s, p);
}

void flash_attention_cpu(const AttentionShape& s, Precision p, std::span<const float> q,
                         std::span<const float> k, std::span<const float> v, std::span<float> o,
                         int64_t tile_q, int64_t tile_kv) {
  check_sizes(s, q.size(), k.size(), v.size(), o.size());
  KVSIM_CHECK(tile_q > 0 && tile_kv > 0, "tiles {}x{}", tile_q, tile_kv);
  const int64_t d = s.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  std::vector<float> tile(static_cast<size_t>(tile_q * tile_kv));
  std::vector<float> acc(static_cast<size_t>(tile_q * d));
  std::vector<float> m(static_cast<size_t>(tile_q));
  std::vector<float> l(static_cast<size_t>(tile_q));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const HeadView hv = head_view(s, b, h);
      for (int64_t i0 = 0; i0 < s.seq_q; i0 += tile_q) {
        const int64_t rows = std::min(tile_q, s.seq_q - i0);
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(m.begin(), m.end(), neg_inf);
        std::fill(l.begin(), l.end(), 0.0f);
        // Causal: tiles past the last row's last visible key hold nothing for this row tile.
        const int64_t kv_end = visible_keys(s, i0 + rows - 1);
        for (int64_t j0 = 0; j0 < kv_end; j0 += tile_kv) {
          const int64_t cols = std::min(tile_kv, s.seq_kv - j0);
          for (int64_t r = 0; r < rows; ++r) {
            const float* qi = &q[hv.q + static_cast<size_t>((i0 + r) * d)];
            const int64_t n = visible_keys(s, i0 + r);
            float tile_max = neg_inf;
            for (int64_t c = 0; c < cols; ++c) {
              float sc = neg_inf;
              if (j0 + c < n) {
                const float* kj = &k[hv.kv + static_cast<size_t>((j0 + c) * d)];
                float dot = 0;
                for (int64_t x = 0; x < d; ++x) dot += qi[x] * kj[x];
                sc = dot * scale;
              }
              tile[r * tile_kv + c] = sc;
              tile_max = std::max(tile_max, sc);
            }
            const float m_new = std::max(m[r], tile_max);
            if (m_new == neg_inf) continue;              // nothing visible yet in this row
            const float alpha = std::exp(m[r] - m_new);  // exp(-inf) = 0 on the first tile
            float* ar = &acc[static_cast<size_t>(r * d)];
            for (int64_t x = 0; x < d; ++x) ar[x] *= alpha;
            float sum = 0;
            for (int64_t c = 0; c < cols; ++c) {
              const float pc = round_to(p, std::exp(tile[r * tile_kv + c] - m_new));
              sum += pc;
              if (pc == 0.0f) continue;
              const float* vj = &v[hv.kv + static_cast<size_t>((j0 + c) * d)];
              for (int64_t x = 0; x < d; ++x) ar[x] += pc * vj[x];
            }
            l[r] = l[r] * alpha + sum;
            m[r] = m_new;
          }
        }
        for (int64_t r = 0; r < rows; ++r) {
          float* oi = &o[hv.q + static_cast<size_t>((i0 + r) * d)];
          for (int64_t x = 0; x < d; ++x) oi[x] = round_to(p, acc[r * d + x] / l[r]);
        }
      }
    }
  }
}

}  // namespace kvsim::kernels
