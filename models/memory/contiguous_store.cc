#include "models/memory/contiguous_store.h"

#include <algorithm>
#include <bit>

#include "core/check.h"
#include "models/memory/store_accounts.h"

namespace kvsim {

std::string_view reserve_policy_name(ReservePolicy p) {
  switch (p) {
    case ReservePolicy::kMaxLen: return "max_len";
    case ReservePolicy::kPromptPlusMaxNew: return "prompt_plus_max_new";
    case ReservePolicy::kPow2: return "pow2";
    case ReservePolicy::kExact: return "exact";
  }
  return "max_len";
}

std::string_view fit_policy_name(FitPolicy p) { return p == FitPolicy::kFirst ? "first" : "best"; }

ContiguousStore::ContiguousStore(int64_t kv_bytes_per_token, ContiguousStoreOptions options)
    : bytes_per_token_(kv_bytes_per_token),
      arena_bytes_(options.arena_bytes),
      reserve_(options.reserve),
      fit_(options.fit),
      max_len_(options.max_len) {
  KVSIM_CHECK(bytes_per_token_ >= 1 && arena_bytes_ >= 1 && max_len_ >= 1,
              "bad contiguous store: {} bytes/token, arena {}, max_len {}", bytes_per_token_,
              arena_bytes_, max_len_);
  holes_.emplace(0, arena_bytes_);
  by_size_.emplace(arena_bytes_, 0);
  free_bytes_ = arena_bytes_;
}

int64_t ContiguousStore::reservation_tokens_for(int64_t prompt, int64_t max_total) const {
  switch (reserve_) {
    case ReservePolicy::kMaxLen: return max_len_;
    case ReservePolicy::kPromptPlusMaxNew: return max_total;
    case ReservePolicy::kPow2: return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(max_total)));
    case ReservePolicy::kExact: return prompt;
  }
  return max_total;
}

int64_t ContiguousStore::carve(int64_t bytes) {
  std::map<int64_t, int64_t>::iterator hole = holes_.end();
  if (fit_ == FitPolicy::kFirst) {
    for (auto it = holes_.begin(); it != holes_.end(); ++it) {
      if (it->second >= bytes) {
        hole = it;
        break;
      }
    }
  } else {
    auto s = by_size_.lower_bound({bytes, -1});
    if (s != by_size_.end()) hole = holes_.find(s->second);
  }
  if (hole == holes_.end()) return -1;
  const int64_t addr = hole->first;
  const int64_t size = hole->second;
  by_size_.erase({size, addr});
  holes_.erase(hole);
  if (size > bytes) {
    holes_.emplace(addr + bytes, size - bytes);
    by_size_.emplace(size - bytes, addr + bytes);
  }
  free_bytes_ -= bytes;
  return addr;
}

void ContiguousStore::give_back(int64_t addr, int64_t bytes) {
  free_bytes_ += bytes;
  auto next = holes_.lower_bound(addr);
  if (next != holes_.end() && next->first == addr + bytes) {  // merge with the hole after
    bytes += next->second;
    by_size_.erase({next->second, next->first});
    next = holes_.erase(next);
  }
  if (next != holes_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == addr) {  // merge with the hole before
      by_size_.erase({prev->second, prev->first});
      addr = prev->first;
      bytes += prev->second;
      holes_.erase(prev);
    }
  }
  holes_.emplace(addr, bytes);
  by_size_.emplace(bytes, addr);
}

bool ContiguousStore::try_extend(int64_t addr, int64_t old_bytes, int64_t new_bytes) {
  auto next = holes_.find(addr + old_bytes);
  const int64_t extra = new_bytes - old_bytes;
  if (next == holes_.end() || next->second < extra) return false;
  const int64_t hole_size = next->second;
  by_size_.erase({hole_size, next->first});
  holes_.erase(next);
  if (hole_size > extra) {
    holes_.emplace(addr + new_bytes, hole_size - extra);
    by_size_.emplace(hole_size - extra, addr + new_bytes);
  }
  free_bytes_ -= extra;
  return true;
}

int64_t ContiguousStore::largest_hole_bytes() const {
  return by_size_.empty() ? 0 : by_size_.rbegin()->first;
}

AllocResult ContiguousStore::fail(int64_t wanted) const {
  const OomReason why = free_bytes_ >= wanted ? OomReason::kFragmentation : OomReason::kCapacity;
  return AllocResult::failure(why, wanted, free_bytes_, largest_hole_bytes());
}

void ContiguousStore::account(const Req& r, int sign) {
  sums_.account(r.tokens, r.reserved_tokens, r.max_total, sign);
  reserved_tokens_ += sign * r.reserved_tokens;
}

AllocResult ContiguousStore::allocate(RequestId request, int64_t prompt_tokens,
                                      int64_t max_total_tokens, const PrefixHashes&) {
  KVSIM_CHECK(!holds(request), "request {} already holds KV", request);
  KVSIM_CHECK(prompt_tokens >= 1 && prompt_tokens <= max_total_tokens,
              "request {}: prompt {} max_total {}", request, prompt_tokens, max_total_tokens);
  const int64_t reserve = reservation_tokens_for(prompt_tokens, max_total_tokens);
  const int64_t wanted = reserve * bytes_per_token_;
  last_request_bytes_ = wanted;
  if (reserve_ == ReservePolicy::kMaxLen && max_total_tokens > max_len_) {
    return AllocResult::failure(OomReason::kTooLong, max_total_tokens * bytes_per_token_,
                                free_bytes_, largest_hole_bytes());
  }
  const int64_t addr = carve(wanted);
  if (addr < 0) return fail(wanted);
  Req r{addr, reserve, prompt_tokens, max_total_tokens};
  account(r, +1);
  requests_.emplace(request, r);
  return AllocResult::success();
}

AllocResult ContiguousStore::grow(RequestId request, int64_t new_total_tokens) {
  Req& r = held_request(requests_, request, "grow");
  KVSIM_CHECK(new_total_tokens > r.tokens, "request {}: grow to {} from {}", request,
              new_total_tokens, r.tokens);
  Req next = r;
  next.tokens = new_total_tokens;
  if (new_total_tokens > r.reserved_tokens) {
    if (reserve_ == ReservePolicy::kMaxLen) {
      return AllocResult::failure(OomReason::kTooLong, new_total_tokens * bytes_per_token_,
                                  free_bytes_, largest_hole_bytes());
    }
    next.reserved_tokens = reserve_ == ReservePolicy::kPow2
                               ? static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(new_total_tokens)))
                               : new_total_tokens;
    const int64_t old_bytes = r.reserved_tokens * bytes_per_token_;
    const int64_t new_bytes = next.reserved_tokens * bytes_per_token_;
    last_request_bytes_ = new_bytes;
    if (!try_extend(r.addr, old_bytes, new_bytes)) {
      // Move: the new region is taken while the old one is still held (the copy).
      const int64_t addr = carve(new_bytes);
      if (addr < 0) return fail(new_bytes);
      give_back(r.addr, old_bytes);
      next.addr = addr;
    }
  }
  account(r, -1);
  account(next, +1);
  r = next;
  return AllocResult::success();
}

void ContiguousStore::release(RequestId request) {
  const Req& r = held_request(requests_, request, "release");
  account(r, -1);
  give_back(r.addr, r.reserved_tokens * bytes_per_token_);
  requests_.erase(request);
}

int64_t ContiguousStore::tokens(RequestId request) const {
  return held_request(requests_, request, "tokens").tokens;
}

int64_t ContiguousStore::tokens_until_growth_allocates(RequestId request) const {
  const Req& r = held_request(requests_, request, "tokens_until_growth_allocates");
  return r.reserved_tokens - r.tokens;
}

KvUsage ContiguousStore::usage() const {
  KvUsage u = held_usage(sums_.live, sums_.reservation, bytes_per_token_,
                         reserved_tokens_ * bytes_per_token_);
  u.capacity_bytes = arena_bytes_;
  u.free_bytes = free_bytes_;
  // Holes too small for the most recent request size: free but unusable for it.
  if (!requests_.empty() && last_request_bytes_ > 0) {
    for (auto s = by_size_.begin(); s != by_size_.end() && s->first < last_request_bytes_; ++s) {
      u.external_bytes += s->first;
    }
  }
  u.requests = static_cast<int64_t>(requests_.size());
  return u;
}

void ContiguousStore::check_invariants() const {
  // Regions and holes tile the arena exactly, without overlap; holes are merged.
  std::map<int64_t, int64_t> pieces = holes_;
  TokenSums sums;
  int64_t reserved = 0;
  for (const auto& [id, r] : requests_) {
    KVSIM_CHECK(r.tokens >= 1 && r.tokens <= r.reserved_tokens, "request {}: {} tokens in {}", id,
                r.tokens, r.reserved_tokens);
    KVSIM_CHECK(pieces.emplace(r.addr, r.reserved_tokens * bytes_per_token_).second,
                "request {} shares address {}", id, r.addr);
    sums.account(r.tokens, r.reserved_tokens, r.max_total, +1);
    reserved += r.reserved_tokens;
  }
  int64_t at = 0;
  bool prev_hole = false;
  for (const auto& [addr, bytes] : pieces) {
    KVSIM_CHECK(addr == at, "arena gap or overlap at {} (expected {})", addr, at);
    const bool hole = holes_.count(addr) != 0;
    KVSIM_CHECK(!(hole && prev_hole), "adjacent holes at {} were not merged", addr);
    prev_hole = hole;
    at += bytes;
  }
  KVSIM_CHECK(at == arena_bytes_, "pieces cover {} of {} arena bytes", at, arena_bytes_);
  KVSIM_CHECK(holes_.size() == by_size_.size(), "hole indexes disagree");
  int64_t free = 0;
  for (const auto& [addr, bytes] : holes_) {
    KVSIM_CHECK(by_size_.count({bytes, addr}) == 1, "hole {} missing from the size index", addr);
    free += bytes;
  }
  KVSIM_CHECK(free == free_bytes_, "free {} != tracked {}", free, free_bytes_);
  KVSIM_CHECK(sums == sums_ && reserved == reserved_tokens_,
              "token sums disagree with the tracked ones");
}

}  // namespace kvsim
