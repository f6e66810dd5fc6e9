// Helpers shared by the latency tests.
#pragma once

#include <catch2/catch.hpp>

#include <string_view>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/latency/latency_model.h"

namespace kvsim::test {

inline const OpCost& find_op(const IterationCost& c, std::string_view name) {
  for (const OpCost& o : c.ops) {
    if (o.name == name) return o;
  }
  FAIL("no operation named " << name);
  static OpCost none;
  return none;
}

inline bool has_op(const IterationCost& c, std::string_view name) {
  for (const OpCost& o : c.ops) {
    if (o.name == name) return true;
  }
  return false;
}

inline LatencyModel make_model(const std::string& model, AttentionKind a = AttentionKind::kFlash,
                               int kv_heads = 0, int tp = 1,
                               const std::string& gpu = "a100-sxm4-80gb") {
  ModelSpec m = Catalog::builtin().model(model);
  if (kv_heads > 0) m.kv_heads = kv_heads;
  const GpuSpec& g = Catalog::builtin().gpu(gpu);
  return LatencyModel(m, g, default_profile(g), a, tp);
}

inline BatchShape prefill_batch(int64_t tokens, int64_t context = 0, int64_t n = 1) {
  BatchShape b;
  b.prefill.assign(static_cast<size_t>(n), PrefillChunk{tokens, context, true});
  return b;
}

inline BatchShape decode_batch(const std::vector<int64_t>& contexts, int block = 0) {
  BatchShape b;
  b.block_tokens = block;
  for (int64_t c : contexts) b.decode.push_back(DecodeSeq{c});
  return b;
}

}  // namespace kvsim::test
