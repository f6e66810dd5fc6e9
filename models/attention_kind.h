// How attention runs, which decides both the activation peak (models/memory) and the cost
// (models/latency): `native` materialises the B x H x s_q x s_k score matrix in HBM (eager
// PyTorch), `flash` tiles it with an online softmax and never holds it.
#pragma once

#include <string_view>

namespace kvsim {

enum class AttentionKind { kNative, kFlash };

std::string_view attention_kind_name(AttentionKind k);  // "native", "flash"
// Throws InputError listing the valid names.
AttentionKind parse_attention_kind(std::string_view name);

}  // namespace kvsim
