// A tiny hybrid model for the hybrid store's hand-computed tests.
#pragma once

#include "models/model_spec.h"

namespace kvsim::test {

// Four layers, 0 and 2 local over `span` tokens, 1 KV head of dim 4 in FP16: 2 x 1 x 4 x 2 = 16
// bytes per layer and token.
inline ModelSpec tiny_hybrid(ModelSpec::LocalKind kind, int span) {
  ModelSpec m;
  m.name = "tiny-hybrid";
  m.layers = 4;
  m.heads = 2;
  m.kv_heads = 1;
  m.head_dim = 4;
  m.hidden = 8;
  m.ffn = 16;
  m.vocab = 10;
  m.max_position = 4096;
  m.local_attention = ModelSpec::LocalAttention{kind, span, {0, 2}};
  return m;
}

}  // namespace kvsim::test
