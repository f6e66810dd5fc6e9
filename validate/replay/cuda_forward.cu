// make_cuda_forward: the Llama-shaped forward pass on device 0, fp16 weights, activations and KV,
// as an IterationClock (forward_pass.h). Each iteration runs, with CUDA events around it:
//   embedding; per layer: RMSNorm, QKV GEMM, RoPE, K/V scattered into the paged pool through
//   the block tables, attention (prefill chunks: the sequence's K/V gathered from the pool into a
//   contiguous copy and kernels/flash_attention.cu v2, causal bottom-right aligned; decode steps:
//   kernels/paged_decode.cu's paged_decode_varlen, over each sequence's own context), O
//   projection, residual add + RMSNorm, gate_up GEMM, SiLU-and-mul, down GEMM, residual add; then
//   the final norm and LM head for the emitting rows only (vLLM computes logits for the sampled
//   rows only).
// The GEMMs are kernels/gemm.cu v1 (cublasGemmEx; the bundle build loads cuBLAS at run time,
// kernels/cublas_dlopen.cc).
//
// The KV pool is setup.num_blocks blocks per layer for K and for V, allocated once and filled with
// random values; each request gets its own blocks from a free list as its KV grows and returns
// them on release(). KV that an iteration assumes but this pass never computed (kv_before beyond
// what it holds: a swap-in, a prefix-cache hit) needs no work: the request's new blocks already
// hold K/V of the right scale (the random fill, or an earlier request's values), so nothing
// happens inside the timed region for it. The engine shares prefix-cached blocks between requests
// while this pass keeps per-request copies, so it may need more blocks than the pool has; those
// alias blocks in use (aliased_blocks() counts them): same memory traffic, other values.
//
// Not timed: building the iteration's token ids, positions, slots and block tables on the host and
// copying them to the device (vLLM's input preparation, which overlaps the GPU in a tuned
// server), and growing the activation buffers when a batch is larger than any before.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <unordered_map>

#include "core/errors.h"
#include "kernels/cuda_api.h"
#include "kernels/cuda_common.cuh"
#include "validate/replay/cuda_forward.h"
#include "validate/replay/cuda_forward_kernels.cuh"

namespace kvsim::validate {

namespace {

namespace cu = kernels::cuda;
using cudafwd::grid_for;
using cudafwd::kThreads;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Kept free beyond the weights and the pool: activations, cuBLAS's workspace, the CUDA context's
// later allocations.
constexpr int64_t kHeadroomBytes = int64_t{1} << 30;

// nvcc cannot compile fmt's compile-time format strings: plain string building here.
std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(bytes) / kGiB);
  return buf;
}

__half* as_half(const cu::DeviceBuffer& b) { return static_cast<__half*>(b.get()); }

// Grows `buf` to at least `bytes` (with slack, so batches that grow slowly do not reallocate each
// time). Reallocation loses the contents: only for scratch buffers.
void reserve(cu::DeviceBuffer& buf, int64_t bytes) {
  if (buf.bytes() >= bytes) return;
  buf = cu::DeviceBuffer(std::max<int64_t>(bytes + bytes / 2, 4096));
}

struct LayerWeights {
  cu::DeviceBuffer attn_norm, wqkv, wo, mlp_norm, gate_up, down;
};

// One prefill chunk of an iteration: rows [row0, row0 + n) attend to the first `context` tokens
// of the sequence whose block table starts at `table_offset` in the prefill tables.
struct PrefillSeg {
  int64_t row0 = 0;
  int n = 0;
  int context = 0;
  int64_t table_offset = 0;
};

// What one iteration runs, built on the host and uploaded before the timed region.
struct Plan {
  int64_t rows = 0;         // T: prefill tokens then one row per decode sequence
  int64_t decode_row0 = 0;  // = prefill tokens
  int decode_seqs = 0;
  int decode_table_stride = 0;
  int max_prefill_n = 0;
  int max_prefill_context = 0;
  std::vector<PrefillSeg> prefill;
  std::vector<int32_t> emit_rows;
  // Host copies of what is uploaded.
  std::vector<int32_t> ids, pos, prefill_tables, decode_tables, decode_contexts;
  std::vector<int64_t> slots;
};

class CudaForwardPass final : public CudaForward {
 public:
  CudaForwardPass(const ForwardSetup& s, const LlamaWeights* weights) : s_(s), m_(s_.model) {
    check_supported();
    const cu::DeviceInfo info = cu::probe_device();
    if (!info.available) throw InputError("--backend cuda: no CUDA device (" + info.why_not + ")");
    qkv_width_ = (m_.heads + 2 * m_.kv_heads) * m_.head_dim;
    pool_elements_ = s_.num_blocks * m_.kv_heads * s_.block_tokens * m_.head_dim;  // per layer
    const int64_t pool_bytes = 2 * int64_t{m_.layers} * pool_elements_ * 2;
    const int64_t weight_bytes = weight_elements() * 2;
    const cu::MemInfo mem = cu::mem_get_info();
    if (pool_bytes + weight_bytes + kHeadroomBytes > mem.free_bytes) {
      throw InputError("--backend cuda: " + m_.name + " needs " +
                       gib(pool_bytes + weight_bytes + kHeadroomBytes) + " GiB (weights " +
                       gib(weight_bytes) + " GiB fp16, KV pool " + std::to_string(s_.num_blocks) +
                       " blocks of " + std::to_string(s_.block_tokens) + " tokens " +
                       gib(pool_bytes) + " GiB, 1 GiB headroom) but " + info.name + " has " +
                       gib(mem.free_bytes) + " GiB free");
    }
    cu::init_libraries();
    init_weights(weights);
    k_pool_ = cu::DeviceBuffer(int64_t{m_.layers} * pool_elements_ * 2);
    v_pool_ = cu::DeviceBuffer(int64_t{m_.layers} * pool_elements_ * 2);
    cu::fill_random(k_pool_.get(), int64_t{m_.layers} * pool_elements_, kernels::Precision::kFp16,
                    s_.seed ^ 0x6b00ull);
    cu::fill_random(v_pool_.get(), int64_t{m_.layers} * pool_elements_, kernels::Precision::kFp16,
                    s_.seed ^ 0x7600ull);
    free_.resize(static_cast<size_t>(s_.num_blocks));
    // Handed out from the back: block 0 first.
    std::iota(free_.rbegin(), free_.rend(), 0);
    warm_up();
    cu::synchronize();
  }

  double seconds(const ClockBatch& batch) override {
    const Plan plan = build_plan(batch);
    upload(plan);
    const std::vector<double> t =
        cu::time_with_events([&] { forward(plan); }, 0, std::max(1, s_.repeats), false);
    emitted_ = static_cast<int64_t>(plan.emit_rows.size());
    // The clock's contract is > 0; an empty batch (no rows) measures two adjacent events.
    return std::max(median(t), 1e-9);
  }

  void release(int64_t request_id) override {
    const auto it = seqs_.find(request_id);
    if (it == seqs_.end()) return;
    for (int32_t b : it->second.owned) free_.push_back(b);
    seqs_.erase(it);
  }

  void release_all() override {
    std::vector<int64_t> ids;
    for (const auto& [id, seq] : seqs_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());  // the free list's order stays deterministic
    for (int64_t id : ids) release(id);
  }

  std::vector<float> last_logits() const override {
    const int64_t n = emitted_ * m_.vocab;
    std::vector<uint16_t> bits(static_cast<size_t>(n));
    if (n > 0) logits_.download(bits.data(), n * 2);
    return kernels::unpack(kernels::Precision::kFp16, bits);
  }

  int64_t aliased_blocks() const override { return aliased_; }

 private:
  struct SeqKv {
    std::vector<int32_t> table;  // logical block -> physical block
    std::vector<int32_t> owned;  // the blocks to return on release (not the aliased ones)
  };

  void check_supported() const {
    const auto no = [&](const std::string& what) {
      throw InputError("--backend cuda: the forward pass runs dense Llama-shaped models; " +
                       m_.name + " " + what);
    };
    if (!kernels::supported_head_dim(m_.head_dim))
      no("has head_dim " + std::to_string(m_.head_dim) + " (64 or 128 only)");
    if (m_.kv_heads <= 0 || m_.heads % m_.kv_heads != 0) no("has heads not a multiple of kv_heads");
    if (m_.num_experts > 1) no("is a mixture of experts");
    if (!m_.gated_mlp) no("has a non-gated MLP");
    if (m_.qkv_bias) no("has QKV biases");
    if (m_.sliding_window) no("has sliding-window attention");
    if (s_.block_tokens < 1 || s_.block_tokens > 256) {
      throw InputError("--backend cuda: block_tokens " + std::to_string(s_.block_tokens) +
                       " outside 1..256");
    }
    if (s_.num_blocks < 1) throw InputError("--backend cuda: the KV pool has no blocks");
  }

  int64_t weight_elements() const {
    const int64_t h = m_.hidden;
    const int64_t per_layer = 2 * h + int64_t{qkv_width_} * h + h * m_.heads * m_.head_dim +
                              2 * int64_t{m_.ffn} * h + h * m_.ffn;
    return int64_t{m_.layers} * per_layer + h + (m_.tied_embeddings ? 1 : 2) * m_.vocab * h;
  }

  // One tensor: uploaded from `host` when given (rounded to fp16), else drawn on the device from
  // its own stream (tensor_index: a running count, so every tensor's values differ).
  cu::DeviceBuffer make_weight(const std::vector<float>* host, int64_t elements, bool norm) {
    cu::DeviceBuffer b(elements * 2);
    const uint64_t stream = cudafwd::mix64(s_.seed ^ cudafwd::mix64(++tensor_index_));
    if (host != nullptr) {
      const std::vector<uint16_t> bits = kernels::pack(kernels::Precision::kFp16, *host);
      b.upload(bits.data(), elements * 2);
      return b;
    }
    // llama_weights.h's distributions: norms uniform in [0.9, 1.1]; linear layers (and the
    // embedding) uniform in [-a, a] with a = 0.02 sqrt(3), standard deviation 0.02.
    const float offset = norm ? 1.0f : 0.0f;
    const float scale = norm ? 0.1f : static_cast<float>(0.02 * std::sqrt(3.0));
    cudafwd::init_weights<<<grid_for(elements), kThreads>>>(as_half(b), elements, stream, offset,
                                                            scale);
    CUDA_CHECK_LAUNCH();
    return b;
  }

  // A given tensor, checked against the size this model needs.
  const std::vector<float>* given(const std::vector<float>& v, int64_t n) const {
    if (static_cast<int64_t>(v.size()) != n) {
      throw InputError("--backend cuda: the given weights do not have " + m_.name + "'s shape");
    }
    return &v;
  }

  void init_weights(const LlamaWeights* host) {
    const int64_t h = m_.hidden, v = m_.vocab, q = int64_t{qkv_width_}, f = m_.ffn;
    const int64_t hd = int64_t{m_.heads} * m_.head_dim;
    if (host && static_cast<int>(host->layers.size()) != m_.layers) {
      throw InputError("--backend cuda: the given weights do not have " + m_.name + "'s shape");
    }
    embedding_ = make_weight(host ? given(host->embed, v * h) : nullptr, v * h, false);
    final_norm_ = make_weight(host ? given(host->final_norm, h) : nullptr, h, true);
    if (!m_.tied_embeddings) {
      lm_head_ = make_weight(host ? given(host->lm_head, v * h) : nullptr, v * h, false);
    }
    layers_.resize(static_cast<size_t>(m_.layers));
    for (int l = 0; l < m_.layers; ++l) {
      LayerWeights& w = layers_[static_cast<size_t>(l)];
      const LlamaLayerWeights* g = host ? &host->layers[static_cast<size_t>(l)] : nullptr;
      w.attn_norm = make_weight(g ? given(g->attn_norm, h) : nullptr, h, true);
      w.wqkv = make_weight(g ? given(g->wqkv, q * h) : nullptr, q * h, false);
      w.wo = make_weight(g ? given(g->wo, h * hd) : nullptr, h * hd, false);
      w.mlp_norm = make_weight(g ? given(g->mlp_norm, h) : nullptr, h, true);
      w.gate_up = make_weight(g ? given(g->w_gate_up, 2 * f * h) : nullptr, 2 * f * h, false);
      w.down = make_weight(g ? given(g->w_down, h * f) : nullptr, h * f, false);
    }
  }

  const cu::DeviceBuffer& lm_head() const { return m_.tied_embeddings ? embedding_ : lm_head_; }

  int32_t take_block() {
    if (!free_.empty()) {
      const int32_t b = free_.back();
      free_.pop_back();
      return b;
    }
    ++aliased_;
    return static_cast<int32_t>((aliased_ - 1) % s_.num_blocks);
  }

  // The request's blocks cover `tokens` tokens afterwards.
  SeqKv& ensure(int64_t request_id, int64_t tokens) {
    SeqKv& seq = seqs_[request_id];
    while (static_cast<int64_t>(seq.table.size()) * s_.block_tokens < tokens) {
      const int64_t aliased_before = aliased_;
      const int32_t b = take_block();
      seq.table.push_back(b);
      if (aliased_ == aliased_before) seq.owned.push_back(b);
    }
    return seq;
  }

  void add_rows(Plan& p, const ClockSeq& c, const SeqKv& seq) {
    for (int64_t i = 0; i < c.new_tokens; ++i) {
      const int64_t position = c.kv_before + i;
      p.ids.push_back(replay_token_id(s_.seed, c.request_id, position, m_.vocab));
      p.pos.push_back(static_cast<int32_t>(position));
      p.slots.push_back(int64_t{seq.table[static_cast<size_t>(position / s_.block_tokens)]} *
                            s_.block_tokens +
                        position % s_.block_tokens);
    }
  }

  Plan build_plan(const ClockBatch& batch) {
    Plan p;
    for (const ClockSeq& c : batch.prefill) {
      if (c.new_tokens < 1) continue;
      const SeqKv& seq = ensure(c.request_id, c.kv_before + c.new_tokens);
      PrefillSeg seg;
      seg.row0 = static_cast<int64_t>(p.ids.size());
      seg.n = static_cast<int>(c.new_tokens);
      seg.context = static_cast<int>(c.kv_before + c.new_tokens);
      seg.table_offset = static_cast<int64_t>(p.prefill_tables.size());
      p.prefill_tables.insert(p.prefill_tables.end(), seq.table.begin(), seq.table.end());
      add_rows(p, c, seq);
      if (c.emits_token) p.emit_rows.push_back(static_cast<int32_t>(p.ids.size() - 1));
      p.max_prefill_n = std::max(p.max_prefill_n, seg.n);
      p.max_prefill_context = std::max(p.max_prefill_context, seg.context);
      p.prefill.push_back(seg);
    }
    p.decode_row0 = static_cast<int64_t>(p.ids.size());
    std::vector<const SeqKv*> decode_seqs;
    for (const ClockSeq& c : batch.decode) {
      const SeqKv& seq = ensure(c.request_id, c.kv_before + 1);
      ClockSeq one = c;
      one.new_tokens = 1;
      add_rows(p, one, seq);
      p.emit_rows.push_back(static_cast<int32_t>(p.ids.size() - 1));
      p.decode_contexts.push_back(static_cast<int32_t>(c.kv_before + 1));
      decode_seqs.push_back(&seq);
      p.decode_table_stride = std::max(p.decode_table_stride, static_cast<int>(seq.table.size()));
    }
    p.decode_seqs = static_cast<int>(decode_seqs.size());
    p.decode_tables.assign(static_cast<size_t>(p.decode_seqs) * p.decode_table_stride, 0);
    for (size_t j = 0; j < decode_seqs.size(); ++j) {
      std::copy(decode_seqs[j]->table.begin(), decode_seqs[j]->table.end(),
                p.decode_tables.begin() + static_cast<int64_t>(j) * p.decode_table_stride);
    }
    p.rows = static_cast<int64_t>(p.ids.size());
    return p;
  }

  template <typename T>
  static void put(cu::DeviceBuffer& buf, const std::vector<T>& v) {
    if (v.empty()) return;
    const int64_t bytes = static_cast<int64_t>(v.size() * sizeof(T));
    reserve(buf, bytes);
    buf.upload(v.data(), bytes);
  }

  // Copies the plan's indices to the device and sizes every scratch buffer for it.
  void upload(const Plan& p) {
    put(d_ids_, p.ids);
    put(d_pos_, p.pos);
    put(d_slots_, p.slots);
    put(d_prefill_tables_, p.prefill_tables);
    put(d_decode_tables_, p.decode_tables);
    put(d_decode_contexts_, p.decode_contexts);
    put(d_emit_rows_, p.emit_rows);
    const int64_t t = std::max<int64_t>(p.rows, 1), h = m_.hidden;
    reserve(x_, t * h * 2);
    reserve(h_, t * h * 2);
    reserve(delta_, t * h * 2);
    reserve(qkv_, t * qkv_width_ * 2);
    reserve(attn_, t * m_.heads * m_.head_dim * 2);
    reserve(gate_up_, t * 2 * m_.ffn * 2);
    reserve(act_, t * m_.ffn * 2);
    reserve(q_, int64_t{m_.heads} * std::max(p.max_prefill_n, 1) * m_.head_dim * 2);
    reserve(o_, int64_t{m_.heads} * std::max(p.max_prefill_n, 1) * m_.head_dim * 2);
    reserve(k_, int64_t{m_.kv_heads} * std::max(p.max_prefill_context, 1) * m_.head_dim * 2);
    reserve(v_, int64_t{m_.kv_heads} * std::max(p.max_prefill_context, 1) * m_.head_dim * 2);
    const int64_t e = std::max<int64_t>(static_cast<int64_t>(p.emit_rows.size()), 1);
    reserve(xe_, e * h * 2);
    reserve(he_, e * h * 2);
    reserve(logits_, e * m_.vocab * 2);
  }

  void gemm(const cu::DeviceBuffer& x, const cu::DeviceBuffer& w, cu::DeviceBuffer& y, int64_t m,
            int64_t n, int64_t k) {
    cu::gemm(1, kernels::GemmShape{m, n, k}, kernels::Precision::kFp16, x.get(), w.get(), y.get());
  }

  // Enqueues the whole forward pass on the default stream (idempotent: a repeat recomputes the
  // same values and writes the same KV slots).
  void forward(const Plan& p) {
    if (p.rows == 0) return;
    const int64_t t = p.rows, h = m_.hidden, hd = int64_t{m_.heads} * m_.head_dim;
    const int64_t layer_pool = pool_elements_;
    cudafwd::embed<<<static_cast<unsigned>(t), kThreads>>>(
        static_cast<const int32_t*>(d_ids_.get()), as_half(embedding_), as_half(x_), m_.hidden);
    CUDA_CHECK_LAUNCH();
    for (int l = 0; l < m_.layers; ++l) {
      const LayerWeights& w = layers_[static_cast<size_t>(l)];
      __half* kp = as_half(k_pool_) + l * layer_pool;
      __half* vp = as_half(v_pool_) + l * layer_pool;
      if (l == 0) {
        cudafwd::rms_norm<<<static_cast<unsigned>(t), kThreads>>>(as_half(x_), as_half(w.attn_norm),
                                                                  as_half(h_), m_.hidden,
                                                                  static_cast<float>(kRmsNormEps));
      } else {  // the previous layer's MLP output joins the residual here
        cudafwd::add_rms_norm<<<static_cast<unsigned>(t), kThreads>>>(
            as_half(x_), as_half(delta_), as_half(w.attn_norm), as_half(h_), m_.hidden,
            static_cast<float>(kRmsNormEps));
      }
      CUDA_CHECK_LAUNCH();
      gemm(h_, w.wqkv, qkv_, t, qkv_width_, h);
      cudafwd::rope<<<static_cast<unsigned>(t), kThreads>>>(
          as_half(qkv_), static_cast<const int32_t*>(d_pos_.get()), m_.heads + m_.kv_heads,
          m_.head_dim, qkv_width_, static_cast<float>(std::log2(kRopeTheta)));
      CUDA_CHECK_LAUNCH();
      cudafwd::kv_scatter<<<static_cast<unsigned>(t), kThreads>>>(
          as_half(qkv_), static_cast<const int64_t*>(d_slots_.get()), kp, vp, m_.heads, m_.kv_heads,
          m_.head_dim, s_.block_tokens, qkv_width_);
      CUDA_CHECK_LAUNCH();
      attention(p, kp, vp);
      gemm(attn_, w.wo, delta_, t, h, hd);
      cudafwd::add_rms_norm<<<static_cast<unsigned>(t), kThreads>>>(
          as_half(x_), as_half(delta_), as_half(w.mlp_norm), as_half(h_), m_.hidden,
          static_cast<float>(kRmsNormEps));
      CUDA_CHECK_LAUNCH();
      gemm(h_, w.gate_up, gate_up_, t, 2 * int64_t{m_.ffn}, h);
      cudafwd::silu_mul<<<grid_for(t * m_.ffn), kThreads>>>(as_half(gate_up_), as_half(act_), t,
                                                            m_.ffn);
      CUDA_CHECK_LAUNCH();
      gemm(act_, w.down, delta_, t, h, m_.ffn);
    }
    cudafwd::add_in_place<<<grid_for(t * h), kThreads>>>(as_half(x_), as_half(delta_), t * h);
    CUDA_CHECK_LAUNCH();
    const int64_t e = static_cast<int64_t>(p.emit_rows.size());
    if (e == 0) return;
    cudafwd::gather_rows<<<static_cast<unsigned>(e), kThreads>>>(
        as_half(x_), static_cast<const int32_t*>(d_emit_rows_.get()), as_half(xe_), m_.hidden);
    cudafwd::rms_norm<<<static_cast<unsigned>(e), kThreads>>>(as_half(xe_), as_half(final_norm_),
                                                              as_half(he_), m_.hidden,
                                                              static_cast<float>(kRmsNormEps));
    CUDA_CHECK_LAUNCH();
    gemm(he_, lm_head(), logits_, e, m_.vocab, h);
  }

  void attention(const Plan& p, const __half* kp, const __half* vp) {
    const int d = m_.head_dim;
    for (const PrefillSeg& seg : p.prefill) {
      cudafwd::gather_q<<<grid_for(int64_t{m_.heads} * seg.n * d), kThreads>>>(
          as_half(qkv_), as_half(q_), seg.row0, seg.n, m_.heads, d, qkv_width_);
      cudafwd::gather_kv<<<grid_for(int64_t{m_.kv_heads} * seg.context * d), kThreads>>>(
          kp, vp, static_cast<const int32_t*>(d_prefill_tables_.get()) + seg.table_offset,
          seg.context, m_.kv_heads, d, s_.block_tokens, as_half(k_), as_half(v_));
      CUDA_CHECK_LAUNCH();
      kernels::AttentionShape a;
      a.batch = 1;
      a.heads = m_.heads;
      a.kv_heads = m_.kv_heads;
      a.seq_q = seg.n;
      a.seq_kv = seg.context;
      a.head_dim = d;
      a.causal = true;
      cu::flash_attention(2, a, kernels::Precision::kFp16, q_.get(), k_.get(), v_.get(), o_.get());
      cudafwd::scatter_o<<<grid_for(int64_t{m_.heads} * seg.n * d), kThreads>>>(
          as_half(o_), as_half(attn_), seg.row0, seg.n, m_.heads, d);
      CUDA_CHECK_LAUNCH();
    }
    if (p.decode_seqs == 0) return;
    cu::PagedDecodeVarlenShape ds;
    ds.batch = p.decode_seqs;
    ds.heads = m_.heads;
    ds.kv_heads = m_.kv_heads;
    ds.head_dim = d;
    ds.block_size = s_.block_tokens;
    ds.table_stride = p.decode_table_stride;
    ds.q_stride = qkv_width_;
    ds.o_stride = int64_t{m_.heads} * d;
    cu::paged_decode_varlen(1, ds, kernels::Precision::kFp16,
                            as_half(qkv_) + p.decode_row0 * qkv_width_, kp, vp,
                            static_cast<const int32_t*>(d_decode_tables_.get()),
                            static_cast<const int32_t*>(d_decode_contexts_.get()),
                            as_half(attn_) + p.decode_row0 * m_.heads * d);
  }

  // One untimed pass over a 64-token prefill and a decode step on scratch blocks, so the first
  // timed iteration does not pay for module loading and cuBLAS's first calls.
  void warm_up() {
    ClockBatch b;
    b.prefill.push_back({-1, 0, std::min<int64_t>(64, s_.num_blocks * s_.block_tokens - 1), true});
    b.decode.push_back({-2, 0, 1, true});
    const Plan plan = build_plan(b);
    upload(plan);
    forward(plan);
    cu::synchronize();
    release(-1);
    release(-2);
    aliased_ = 0;
  }

  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }

  ForwardSetup s_;
  const ModelSpec& m_;
  int qkv_width_ = 0;
  int64_t pool_elements_ = 0;
  cu::DeviceBuffer embedding_, final_norm_, lm_head_;
  std::vector<LayerWeights> layers_;
  cu::DeviceBuffer k_pool_, v_pool_;
  std::vector<int32_t> free_;
  std::unordered_map<int64_t, SeqKv> seqs_;
  int64_t aliased_ = 0;
  int64_t emitted_ = 0;
  uint64_t tensor_index_ = 0;
  // Per-iteration indices and scratch.
  cu::DeviceBuffer d_ids_, d_pos_, d_slots_, d_prefill_tables_, d_decode_tables_,
      d_decode_contexts_, d_emit_rows_;
  cu::DeviceBuffer x_, h_, delta_, qkv_, attn_, gate_up_, act_, q_, o_, k_, v_, xe_, he_;
  cu::DeviceBuffer logits_;
};

}  // namespace

std::unique_ptr<CudaForward> make_cuda_forward_pass(const ForwardSetup& setup,
                                                    const LlamaWeights* weights) {
  return std::make_unique<CudaForwardPass>(setup, weights);
}

std::unique_ptr<IterationClock> make_cuda_forward(const ForwardSetup& setup) {
  return make_cuda_forward_pass(setup);
}

}  // namespace kvsim::validate
