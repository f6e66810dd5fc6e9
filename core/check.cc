#include "core/check.h"

namespace kvsim::detail {

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  throw InvariantError(fmt::format("{}:{}: invariant '{}' failed: {}", file, line, cond, msg));
}

}  // namespace kvsim::detail
