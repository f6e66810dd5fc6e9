// HybridKvCoordinator's deferred growth (DeferredGrowth, models/memory/kv_capabilities.h): the
// windows the fast-forward opens (inside a request's last block, or long: to its max_total), the
// tokens and block crossings it adds in aggregate, and their settling. A window ends before the
// first growth at which a local group's manager would free a block (remove_skipped_blocks frees
// at each growth the blocks that left the window or chunk of the tokens computed before it), so
// every block is freed at the step stepping frees it, by grow(). With gpt-oss's window of 128 and
// blocks of 16 that growth (to a target of 0 modulo 16) comes one token before each crossing (1
// modulo 16): a long window holds at most one crossing, counted in aggregate, and its free is due.
#include <algorithm>

#include "core/check.h"
#include "models/memory/hybrid_coordinator.h"
#include "models/memory/store_accounts.h"

namespace kvsim {

int64_t HybridKvCoordinator::open(RequestId request) {
  Req& r = closed_req(request, "open");
  const int64_t cap = (r.tokens + block_tokens_ - 1) / block_tokens_ * block_tokens_;
  // Its last block's slack up to max_total, and at most up to the computed tokens at which the
  // next growth would free a block.
  int64_t end = std::min(cap, r.max_total);
  for (size_t g = 0; g < managers_.size(); ++g) {
    end = std::min(end, managers_[g].next_free_at(r.tables[g]));
  }
  r.window = std::max<int64_t>(0, end - r.tokens);
  return r.window;
}

int64_t HybridKvCoordinator::open_long(RequestId request) {
  KVSIM_CHECK(crossings_in_aggregate(), "open_long: blocks are not counted in aggregate here");
  Req& r = closed_req(request, "open_long");
  int64_t end = r.max_total;
  for (size_t g = 0; g < managers_.size(); ++g) {
    end = std::min(end, managers_[g].next_free_at(r.tables[g]));
  }
  r.window = std::max<int64_t>(0, end - r.tokens);
  return r.window;
}

void HybridKvCoordinator::add_crossings(int64_t n) {
  // Each is grow()'s step for a token that starts a new block in every group, whose end is within
  // its request's max_total and before which no block is freed (open_long): the blocks leave the
  // free list, the token is live, and each block's other slots are reservation.
  const auto groups = static_cast<int64_t>(managers_.size());
  KVSIM_CHECK(crossings_in_aggregate() && n >= 0 && n * groups <= free_blocks(),
              "{} block crossings of {} groups with {} blocks free", n, groups, free_blocks());
  if (n == 0) return;
  crossed_.resize(managers_.size());
  for (size_t g = 0; g < managers_.size(); ++g) managers_[g].take_blocks(n, crossed_[g]);
  deferred_tokens_ += n;
  reservation_bytes_ += n * block_tokens_ * bytes_per_token_;
}

void HybridKvCoordinator::add(int64_t tokens) {
  // Each is one reservation token of every group turning live: the change grow() would make.
  KVSIM_CHECK(tokens >= 0 && (deferred_tokens_ + tokens) * bytes_per_token_ <= reservation_bytes_,
              "deferring {} tokens with {} deferred and {} bytes reserved", tokens,
              deferred_tokens_, reservation_bytes_);
  deferred_tokens_ += tokens;
}

void HybridKvCoordinator::settle(RequestId request, int64_t tokens) {
  Req& r = held_request(reqs_, request, "settle");
  KVSIM_CHECK(r.window >= 0, "request {}: settling a deferral window that is not open", request);
  KVSIM_CHECK(tokens >= 0 && tokens <= deferred_tokens_ && tokens <= r.window,
              "request {}: settling {} deferred tokens ({} outstanding) in a window of {}", request,
              tokens, deferred_tokens_, r.window);
  r.window = -1;
  deferred_tokens_ -= tokens;
  if (tokens == 0) return;
  // grow()'s step for these tokens: no group frees a block inside the window, and every group's
  // last block has their room.
  add_reservation(r, -1);
  // A long window's crossings: their blocks left the pool at add_crossings(), with their
  // reservation; the request's tables adopt them (every table has the same length).
  const int64_t crossed = (r.tokens + tokens + block_tokens_ - 1) / block_tokens_ -
                          static_cast<int64_t>(r.tables[0].blocks.size());
  if (crossed > 0) {
    KVSIM_CHECK(!crossed_.empty() && crossed <= static_cast<int64_t>(crossed_[0].size()),
                "request {}: settling {} crossed blocks, {} taken", request, crossed,
                crossed_.empty() ? 0 : crossed_[0].size());
    reservation_bytes_ -= crossed * block_tokens_ * bytes_per_token_;
  }
  for (size_t g = 0; g < managers_.size(); ++g) {
    if (crossed > 0) {
      managers_[g].adopt_blocks(r.tables[g], r.tokens + tokens, crossed_[g]);
    } else {
      managers_[g].allocate_new_blocks(r.tables[g], r.tokens + tokens);
    }
  }
  r.tokens += tokens;
  add_reservation(r, +1);
  key_full_blocks(r);
}

std::optional<KvUsage> HybridKvCoordinator::usage_after(int64_t tokens, int64_t crossings,
                                                        int64_t swaps) const {
  if (swaps != 0) return std::nullopt;
  return usage_with(tokens, crossings);
}

}  // namespace kvsim
