#include "kernels/cpu_ref/shapes.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/errors.h"

namespace kvsim::kernels {

namespace {

void require_positive(int64_t v, const char* name, const std::string& shape) {
  if (v <= 0) throw InputError(fmt::format("{}: {} must be positive, got {}", shape, name, v));
}

void require_heads(int64_t heads, int64_t kv_heads, int64_t head_dim, const std::string& shape) {
  if (heads % kv_heads != 0) {
    throw InputError(fmt::format("{}: kv_heads {} must divide heads {}", shape, kv_heads, heads));
  }
  if (!supported_head_dim(head_dim)) {
    throw InputError(fmt::format("{}: head_dim must be 64 or 128, got {}", shape, head_dim));
  }
}

}  // namespace

int64_t AttentionShape::visible_pairs() const {
  int64_t per_head = seq_q * seq_kv;
  if (causal) {
    // Row i sees min(seq_kv, i + 1 + offset) keys, offset = seq_kv - seq_q >= 0: with the
    // bottom-right alignment no row exceeds seq_kv, so the sum is seq_q*(offset) +
    // seq_q(seq_q+1)/2.
    const int64_t offset = seq_kv - seq_q;
    per_head = seq_q * offset + seq_q * (seq_q + 1) / 2;
  }
  return batch * heads * per_head;
}

void AttentionShape::validate() const {
  const std::string s = describe();
  for (auto [v, name] : {std::pair{batch, "batch"},
                         {heads, "heads"},
                         {kv_heads, "kv_heads"},
                         {seq_q, "seq_q"},
                         {seq_kv, "seq_kv"},
                         {head_dim, "head_dim"}}) {
    require_positive(v, name, s);
  }
  require_heads(heads, kv_heads, head_dim, s);
  if (causal && seq_q > seq_kv) {
    throw InputError(fmt::format("{}: a causal shape needs seq_q <= seq_kv", s));
  }
}

std::string AttentionShape::describe() const {
  return fmt::format("B={} H={} Hkv={} Sq={} Skv={} D={}{}", batch, heads, kv_heads, seq_q, seq_kv,
                     head_dim, causal ? " causal" : "");
}

void PagedDecodeShape::validate() const {
  const std::string s = describe();
  for (auto [v, name] : {std::pair{batch, "batch"},
                         {heads, "heads"},
                         {kv_heads, "kv_heads"},
                         {head_dim, "head_dim"},
                         {context, "context"},
                         {block_size, "block_size"}}) {
    require_positive(v, name, s);
  }
  require_heads(heads, kv_heads, head_dim, s);
  if (block_size > 256) {
    throw InputError(fmt::format("{}: block_size must be at most 256, got {}", s, block_size));
  }
  if (num_blocks() > int64_t{1} << 31) {
    throw InputError(fmt::format("{}: more blocks than an int32 block table can name", s));
  }
}

std::string PagedDecodeShape::describe() const {
  return fmt::format("B={} H={} Hkv={} D={} ctx={} block={}", batch, heads, kv_heads, head_dim,
                     context, block_size);
}

void GemmShape::validate() const {
  const std::string s = describe();
  for (auto [v, name] : {std::pair{m, "m"}, {n, "n"}, {k, "k"}}) require_positive(v, name, s);
  if (std::max({m, n, k}) > (int64_t{1} << 31) - 1) {
    throw InputError(fmt::format("{}: dimensions must fit in int32", s));
  }
}

std::string GemmShape::describe() const { return fmt::format("M={} N={} K={}", m, n, k); }

}  // namespace kvsim::kernels
