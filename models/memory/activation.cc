#include "models/memory/activation.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/errors.h"
#include "core/units.h"
#include "models/model_spec.h"

namespace kvsim {

namespace {

// a x b x ... with an InputError instead of a silent wrap-around.
int64_t mul(std::initializer_list<int64_t> factors) {
  int64_t r = 1;
  for (int64_t f : factors) {
    auto p = checked_mul(r, f);
    if (!p) throw InputError("activation bytes overflow 64-bit arithmetic; use smaller batches");
    r = *p;
  }
  return r;
}

int64_t add(int64_t a, int64_t b) {
  auto s = checked_add(a, b);
  if (!s) throw InputError("activation bytes overflow 64-bit arithmetic; use smaller batches");
  return *s;
}

}  // namespace

int64_t attention_score_bytes(const ModelSpec& model, std::span<const BatchChunk> chunks) {
  const int64_t elem = unquantized_bytes(model.weight_dtype);  // 16-bit when quantized
  int64_t total = 0;
  for (const BatchChunk& c : chunks) {
    total = add(total, mul({model.heads, c.query_tokens, c.context_tokens, elem}));
  }
  return total;
}

int64_t activation_peak_bytes(const ModelSpec& model, std::span<const BatchChunk> chunks,
                              AttentionKind attention) {
  return activation_peak_bytes(model, chunks, 0, 0, attention);
}

int64_t activation_peak_bytes(const ModelSpec& model, std::span<const BatchChunk> chunks,
                              int64_t decode_seqs, int64_t decode_context_tokens,
                              AttentionKind attention) {
  if (chunks.empty() && decode_seqs == 0) return 0;
  const int64_t elem = unquantized_bytes(model.weight_dtype);  // 16-bit when quantized
  int64_t t = 0;
  for (const BatchChunk& c : chunks) t = add(t, c.query_tokens);
  t = add(t, decode_seqs);
  const int64_t b = add(static_cast<int64_t>(chunks.size()), decode_seqs);
  int64_t bytes = mul({4, t, model.hidden, elem});
  bytes = add(bytes, mul({t, model.heads + 2 * int64_t{model.kv_heads}, model.head_dim, elem}));
  // The MLP's intermediate rows: a dense MLP's, or a MoE layer's top-k routed rows plus its
  // shared experts', whichever is larger.
  int64_t mlp_width = model.ffn;
  if (model.moe()) {
    mlp_width = std::max<int64_t>(
        mlp_width, int64_t{model.routed_ffn()} * model.experts_per_token + model.shared_expert_ffn);
  }
  bytes = add(bytes, mul({3, t, mlp_width, elem}));
  if (attention == AttentionKind::kNative) {
    // Decode steps have one query token each: H x 1 x context x elem, summed.
    const int64_t decode_scores = mul({model.heads, decode_context_tokens, elem});
    bytes = add(bytes, mul({2, add(attention_score_bytes(model, chunks), decode_scores)}));
  } else {
    bytes = add(bytes, mul({t, model.heads, 4}));
  }
  bytes = add(bytes, mul({b, model.vocab, 4}));
  return bytes;
}

int64_t profile_activation_peak_bytes(const ModelSpec& model, int64_t max_batched_tokens,
                                      int64_t max_num_seqs, AttentionKind attention) {
  if (max_batched_tokens <= 0 || max_num_seqs <= 0) return 0;
  const int64_t seqs = std::min(max_num_seqs, max_batched_tokens);
  std::vector<BatchChunk> chunks;
  chunks.reserve(static_cast<size_t>(seqs));
  for (int64_t i = 0; i < seqs; ++i) {
    // Spread the remainder over the first sequences so the tokens sum exactly.
    const int64_t len = max_batched_tokens / seqs + (i < max_batched_tokens % seqs ? 1 : 0);
    chunks.push_back({len, len});
  }
  return activation_peak_bytes(model, chunks, attention);
}

}  // namespace kvsim
