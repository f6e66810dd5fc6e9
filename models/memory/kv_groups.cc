#include "models/memory/kv_groups.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvsim {

int KvGroupLayout::padding_layers() const {
  int pad = 0;
  for (const KvGroup& g : groups) pad += group_size - static_cast<int>(g.layers.size());
  return pad;
}

KvGroupLayout kv_group_layout(const ModelSpec& m) {
  KvGroupLayout out;
  out.layer_bytes_per_token = m.kv_elements_per_layer(m.kv_heads) * dtype_bytes(m.kv_dtype);
  // The model's attention types: full layers, and the local ones of its one local kind.
  std::vector<int> global, local;
  KvGroup::Kind local_kind = KvGroup::Kind::kFull;
  int64_t span = 0;
  if (m.local_attention) {
    local = m.local_attention->layers;
    local_kind = m.local_attention->kind == ModelSpec::LocalKind::kChunked
                     ? KvGroup::Kind::kChunked
                     : KvGroup::Kind::kSlidingWindow;
    span = m.local_attention->size;
    for (int i = 0; i < m.layers; ++i) {
      if (!std::binary_search(local.begin(), local.end(), i)) global.push_back(i);
    }
  } else {
    for (int i = 0; i < m.layers; ++i) global.push_back(i);
    if (m.sliding_window) {  // every layer slides: one type still
      local.swap(global);
      local_kind = KvGroup::Kind::kSlidingWindow;
      span = *m.sliding_window;
    }
  }
  struct Type {
    KvGroup::Kind kind;
    int64_t span;
    const std::vector<int>* layers;
  };
  std::vector<Type> types;
  if (!global.empty()) types.push_back({KvGroup::Kind::kFull, 0, &global});
  if (!local.empty()) types.push_back({local_kind, span, &local});
  size_t min_n = types[0].layers->size(), max_n = min_n;
  for (const Type& t : types) {
    min_n = std::min(min_n, t.layers->size());
    max_n = std::max(max_n, t.layers->size());
  }
  // vLLM: the smallest type's count, or the largest's when it is under 1.5 x the smallest
  // (gpt-oss's 18 + 18 stays 18; 12 + 13 would be 13).
  const size_t group_size = 2 * max_n < 3 * min_n ? max_n : min_n;
  out.group_size = static_cast<int>(group_size);
  for (const Type& t : types) {
    const size_t n = t.layers->size();
    const size_t num_groups = (n + group_size - 1) / group_size;
    // layers[i::num_groups] to group i, as vLLM deals them (so pipeline stages pad evenly).
    for (size_t i = 0; i < num_groups; ++i) {
      KvGroup g{t.kind, t.span, {}};
      for (size_t j = i; j < n; j += num_groups) g.layers.push_back((*t.layers)[j]);
      out.groups.push_back(std::move(g));
    }
  }
  return out;
}

int64_t kv_group_skipped_blocks(const KvGroup& g, int64_t computed, int64_t block_tokens) {
  int64_t skipped_tokens = 0;
  switch (g.kind) {
    case KvGroup::Kind::kFull: return 0;
    case KvGroup::Kind::kSlidingWindow:
      skipped_tokens = std::max<int64_t>(0, computed - g.span + 1);
      break;
    case KvGroup::Kind::kChunked: skipped_tokens = computed / g.span * g.span; break;
  }
  return skipped_tokens / block_tokens;
}

std::optional<int64_t> kv_group_admission_cap(const KvGroup& g, int64_t max_len,
                                              int64_t block_tokens, int64_t batched) {
  const auto blocks = [&](int64_t tokens) { return (tokens + block_tokens - 1) / block_tokens; };
  switch (g.kind) {
    case KvGroup::Kind::kFull: return std::nullopt;
    case KvGroup::Kind::kSlidingWindow: return blocks(std::min(g.span - 1 + batched, max_len)) + 1;
    case KvGroup::Kind::kChunked: return blocks(std::min(g.span + batched, max_len));
  }
  return std::nullopt;
}

int64_t kv_group_admission_blocks(const KvGroup& g, int64_t tokens, int64_t block_tokens,
                                  int64_t batched) {
  // The cap at max_len = tokens is the cap at any longer max_model_len wherever it binds.
  const int64_t table = (tokens + block_tokens - 1) / block_tokens;
  return std::min(table, kv_group_admission_cap(g, tokens, block_tokens, batched).value_or(table));
}

int64_t kv_group_blocks_held(const KvGroup& g, int64_t tokens, int64_t block_tokens) {
  const int64_t table = (tokens + block_tokens - 1) / block_tokens;
  return table - std::min(table, kv_group_skipped_blocks(g, tokens, block_tokens));
}

std::string kv_group_name(const KvGroup& g) {
  switch (g.kind) {
    case KvGroup::Kind::kFull: return "full";
    case KvGroup::Kind::kSlidingWindow: return fmt::format("sliding window {}", g.span);
    case KvGroup::Kind::kChunked: return fmt::format("chunked {}", g.span);
  }
  return "?";
}

}  // namespace kvsim
