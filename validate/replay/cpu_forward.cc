#include "validate/replay/cpu_forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/errors.h"
#include "kernels/cpu_ref/random_inputs.h"
#include "validate/replay/cpu_linear.h"

namespace kvsim::validate {

namespace {

// The CPU forward pass's float32 weights stay under this (the pool has its own 8 GiB cap).
constexpr int64_t kMaxCpuWeightBytes = int64_t{8} << 30;

void grow_buffer(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// y = x / sqrt(mean(x^2) + eps) * w, row by row.
void rms_norm_rows(const float* x, const float* w, float* y, int64_t rows, int64_t hidden) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    float* yr = y + r * hidden;
    float ss = 0;
    for (int64_t c = 0; c < hidden; ++c) ss += xr[c] * xr[c];
    const float inv =
        1.0f / std::sqrt(ss / static_cast<float>(hidden) + static_cast<float>(kRmsNormEps));
    for (int64_t c = 0; c < hidden; ++c) yr[c] = xr[c] * inv * w[c];
  }
}

// Checks what must hold before anything is allocated.
const ForwardSetup& checked_setup(const ForwardSetup& setup) {
  if (setup.repeats < 1 || setup.threads < 1) {
    throw InputError(fmt::format("cpu forward: repeats and threads must be >= 1, got {} and {}",
                                 setup.repeats, setup.threads));
  }
  check_llama_shaped(setup.model, kMaxCpuWeightBytes);
  return setup;
}

}  // namespace

CpuForward::CpuForward(const ForwardSetup& setup)
    : setup_(checked_setup(setup)),
      weights_(random_llama_weights(setup.model, setup.seed)),
      pool_(setup.model, setup.block_tokens, setup.num_blocks, setup.seed) {}

void CpuForward::fill_missing_kv(int64_t id, int64_t from, int64_t to) {
  // Values like those a forward pass writes (K and V of unit-scale activations): uniform [-1, 1).
  kernels::InputRng rng(setup_.seed ^ 0xf111ull ^ (++fill_counter_ * 0x9e3779b97f4a7c15ull));
  const ModelSpec& m = setup_.model;
  const std::span<const int32_t> table = pool_.block_table(id);
  for (int layer = 0; layer < m.layers; ++layer) {
    for (int64_t p = from; p < to; ++p) {
      for (int kvh = 0; kvh < m.kv_heads; ++kvh) {
        float* k = pool_.k_at(layer, table, p, kvh);
        float* v = pool_.v_at(layer, table, p, kvh);
        for (int c = 0; c < m.head_dim; ++c) k[c] = rng.uniform(-1.0f, 1.0f);
        for (int c = 0; c < m.head_dim; ++c) v[c] = rng.uniform(-1.0f, 1.0f);
      }
    }
  }
}

void CpuForward::prepare(const ClockBatch& batch) {
  const ModelSpec& m = setup_.model;
  seqs_.clear();
  tokens_ = 0;
  emitting_ = 0;
  int64_t max_position = 0;
  auto add = [&](const ClockSeq& s) {
    if (s.kv_before < 0 || s.new_tokens < 1) {
      throw InvariantError("cpu forward: request " + std::to_string(s.request_id) +
                           " has kv_before " + std::to_string(s.kv_before) + " and new_tokens " +
                           std::to_string(s.new_tokens));
    }
    seqs_.push_back({s.request_id, s.kv_before, s.new_tokens, s.emits_token, tokens_});
    tokens_ += s.new_tokens;
    emitting_ += s.emits_token ? 1 : 0;
    max_position = std::max(max_position, s.kv_before + s.new_tokens);
  };
  for (const ClockSeq& s : batch.prefill) add(s);
  for (const ClockSeq& s : batch.decode) add(s);
  for (const SeqRows& s : seqs_) {
    pool_.reserve(s.id, s.kv_before + s.new_tokens);
    const int64_t have = pool_.filled(s.id);
    if (have < s.kv_before) fill_missing_kv(s.id, have, s.kv_before);
    pool_.set_filled(s.id, std::max(have, s.kv_before + s.new_tokens));
  }
  // Rotary table up to the furthest position, in double then rounded (as vLLM caches cos/sin).
  const int64_t half = m.head_dim / 2;
  const int64_t known = static_cast<int64_t>(cos_.size()) / half;
  if (max_position > known) {
    cos_.resize(static_cast<size_t>(max_position * half));
    sin_.resize(static_cast<size_t>(max_position * half));
    for (int64_t p = known; p < max_position; ++p) {
      for (int64_t i = 0; i < half; ++i) {
        const double freq =
            std::pow(kRopeTheta, -2.0 * static_cast<double>(i) / static_cast<double>(m.head_dim));
        const double angle = static_cast<double>(p) * freq;
        cos_[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
        sin_[static_cast<size_t>(p * half + i)] = static_cast<float>(std::sin(angle));
      }
    }
  }
  const int64_t qkv_cols = int64_t{m.heads + 2 * m.kv_heads} * m.head_dim;
  grow_buffer(x_, tokens_ * m.hidden);
  grow_buffer(h_, tokens_ * m.hidden);
  grow_buffer(qkv_, tokens_ * qkv_cols);
  grow_buffer(attn_, tokens_ * int64_t{m.heads} * m.head_dim);
  grow_buffer(proj_, tokens_ * m.hidden);
  grow_buffer(gate_up_, tokens_ * 2 * int64_t{m.ffn});
  grow_buffer(act_, tokens_ * m.ffn);
  grow_buffer(sel_, 2 * emitting_ * m.hidden);
  grow_buffer(logits_, emitting_ * int64_t{m.vocab});
}

// NeoX-style rotation: element i pairs with element i + head_dim / 2.
void CpuForward::rope(float* head, int64_t position) const {
  const int64_t half = setup_.model.head_dim / 2;
  const float* c = &cos_[static_cast<size_t>(position * half)];
  const float* s = &sin_[static_cast<size_t>(position * half)];
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = head[i];
    const float x2 = head[i + half];
    head[i] = x1 * c[i] - x2 * s[i];
    head[i + half] = x2 * c[i] + x1 * s[i];
  }
}

void CpuForward::forward() {
  const ModelSpec& m = setup_.model;
  const int64_t H = m.hidden;
  const int64_t D = m.head_dim;
  const int64_t q_cols = int64_t{m.heads} * D;
  const int64_t kv_cols = int64_t{m.kv_heads} * D;
  const int64_t qkv_cols = q_cols + 2 * kv_cols;
  const int64_t F = m.ffn;
  const int threads = setup_.threads;
  const int64_t T = tokens_;
  for (const SeqRows& s : seqs_) {  // embedding lookup
    for (int64_t i = 0; i < s.new_tokens; ++i) {
      const int32_t tok = replay_token_id(setup_.seed, s.id, s.kv_before + i, m.vocab);
      std::memcpy(&x_[static_cast<size_t>((s.row0 + i) * H)],
                  &weights_.embed[static_cast<size_t>(int64_t{tok} * H)],
                  static_cast<size_t>(H) * sizeof(float));
    }
  }
  const AttentionDims dims{m.heads, m.kv_heads, m.head_dim};
  for (int layer = 0; layer < m.layers; ++layer) {
    const LlamaLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
    rms_norm_rows(x_.data(), w.attn_norm.data(), h_.data(), T, H);
    linear_f32(h_.data(), w.wqkv.data(), qkv_.data(), T, qkv_cols, H, threads);
    for (const SeqRows& s : seqs_) {
      const std::span<const int32_t> table = pool_.block_table(s.id);
      for (int64_t i = 0; i < s.new_tokens; ++i) {
        const int64_t pos = s.kv_before + i;
        float* row = &qkv_[static_cast<size_t>((s.row0 + i) * qkv_cols)];
        for (int h = 0; h < m.heads; ++h) rope(row + h * D, pos);
        for (int h = 0; h < m.kv_heads; ++h) {
          float* k = row + q_cols + h * D;
          rope(k, pos);
          std::memcpy(pool_.k_at(layer, table, pos, h), k, static_cast<size_t>(D) * sizeof(float));
          std::memcpy(pool_.v_at(layer, table, pos, h), row + q_cols + kv_cols + h * D,
                      static_cast<size_t>(D) * sizeof(float));
        }
      }
    }
    for (const SeqRows& s : seqs_) {
      paged_chunk_attention(pool_, layer, pool_.block_table(s.id), dims, s.kv_before, s.new_tokens,
                            &qkv_[static_cast<size_t>(s.row0 * qkv_cols)], qkv_cols,
                            &attn_[static_cast<size_t>(s.row0 * q_cols)], q_cols, scratch_);
    }
    linear_f32(attn_.data(), w.wo.data(), proj_.data(), T, H, q_cols, threads);
    for (int64_t e = 0; e < T * H; ++e) x_[static_cast<size_t>(e)] += proj_[static_cast<size_t>(e)];
    rms_norm_rows(x_.data(), w.mlp_norm.data(), h_.data(), T, H);
    linear_f32(h_.data(), w.w_gate_up.data(), gate_up_.data(), T, 2 * F, H, threads);
    for (int64_t r = 0; r < T; ++r) {  // SiLU(gate) * up
      const float* g = &gate_up_[static_cast<size_t>(r * 2 * F)];
      const float* u = g + F;
      float* a = &act_[static_cast<size_t>(r * F)];
      for (int64_t c = 0; c < F; ++c) a[c] = g[c] / (1.0f + std::exp(-g[c])) * u[c];
    }
    linear_f32(act_.data(), w.w_down.data(), proj_.data(), T, H, F, threads);
    for (int64_t e = 0; e < T * H; ++e) x_[static_cast<size_t>(e)] += proj_[static_cast<size_t>(e)];
  }
  // The emitting rows: each such sequence's last position.
  int64_t e = 0;
  for (const SeqRows& s : seqs_) {
    if (!s.emits) continue;
    std::memcpy(&sel_[static_cast<size_t>(e * H)],
                &x_[static_cast<size_t>((s.row0 + s.new_tokens - 1) * H)],
                static_cast<size_t>(H) * sizeof(float));
    ++e;
  }
  float* normed = sel_.data() + emitting_ * H;  // sel_ may be empty: no emitting row
  rms_norm_rows(sel_.data(), weights_.final_norm.data(), normed, emitting_, H);
  linear_f32(normed, weights_.lm_head_or_embed().data(), logits_.data(), emitting_, m.vocab, H,
             threads);
}

std::vector<float> CpuForward::run(const ClockBatch& batch) {
  prepare(batch);
  forward();
  return {logits_.begin(), logits_.begin() + emitting_ * setup_.model.vocab};
}

double CpuForward::seconds(const ClockBatch& batch) {
  prepare(batch);
  std::vector<double> times;
  times.reserve(static_cast<size_t>(setup_.repeats));
  for (int r = 0; r < setup_.repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    forward();
    const auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  // The median (the upper one of an even count); never 0, the engine needs time to pass.
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2),
                   times.end());
  return std::max(times[times.size() / 2], 1e-9);
}

std::unique_ptr<IterationClock> make_cpu_forward(const ForwardSetup& setup) {
  return std::make_unique<CpuForward>(setup);
}

}  // namespace kvsim::validate
