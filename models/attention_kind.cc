#include "models/attention_kind.h"

#include <fmt/format.h>

#include "core/errors.h"

namespace kvsim {

std::string_view attention_kind_name(AttentionKind k) {
  return k == AttentionKind::kNative ? "native" : "flash";
}

AttentionKind parse_attention_kind(std::string_view name) {
  if (name == "native") return AttentionKind::kNative;
  if (name == "flash") return AttentionKind::kFlash;
  throw InputError(fmt::format("unknown attention kind '{}' (expected native or flash)", name));
}

}  // namespace kvsim
