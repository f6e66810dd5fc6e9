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
    case ReservePolicy::kPromptPlusPow2New: return "prompt_plus_pow2_new";
    case ReservePolicy::kExact: return "exact";
  }
  return "max_len";
}

std::string_view fit_policy_name(FitPolicy p) {
  switch (p) {
    case FitPolicy::kFirst: return "first";
    case FitPolicy::kBest: return "best";
    case FitPolicy::kBuddy: return "buddy";
  }
  return "first";
}

namespace {
int64_t pow2_at_least(int64_t n) {
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(n)));
}
}  // namespace

ContiguousStore::ContiguousStore(int64_t kv_bytes_per_token, ContiguousStoreOptions options)
    : bytes_per_token_(kv_bytes_per_token),
      arena_bytes_(options.arena_bytes),
      reserve_(options.reserve),
      fit_(options.fit),
      max_len_(options.max_len) {
  KVSIM_CHECK(bytes_per_token_ >= 1 && arena_bytes_ >= 1 && max_len_ >= 1,
              "bad contiguous store: {} bytes/token, arena {}, max_len {}", bytes_per_token_,
              arena_bytes_, max_len_);
  if (fit_ == FitPolicy::kBuddy) {
    // One buddy slot per token; the bytes of a partial last token can never be handed out.
    const int64_t slots = arena_bytes_ / bytes_per_token_;
    KVSIM_CHECK(slots >= 1, "buddy arena of {} bytes holds no token of {} bytes", arena_bytes_,
                bytes_per_token_);
    arena_bytes_ = slots * bytes_per_token_;
    buddy_.emplace(slots);
  } else {
    holes_.emplace(0, arena_bytes_);
    by_size_.emplace(arena_bytes_, 0);
  }
  free_bytes_ = arena_bytes_;
}

int64_t ContiguousStore::reservation_tokens_for(int64_t prompt, int64_t max_total) const {
  switch (reserve_) {
    case ReservePolicy::kMaxLen: return max_len_;
    case ReservePolicy::kPromptPlusMaxNew: return max_total;
    case ReservePolicy::kPow2: return pow2_at_least(max_total);
    case ReservePolicy::kPromptPlusPow2New:
      return max_total == prompt ? prompt : prompt + pow2_at_least(max_total - prompt);
    case ReservePolicy::kExact: return prompt;
  }
  return max_total;
}

int64_t ContiguousStore::region_tokens_for(int64_t reserved) const {
  return fit_ == FitPolicy::kBuddy ? BuddyAllocator::block_units(reserved) : reserved;
}

int64_t ContiguousStore::carve(int64_t bytes) {
  if (buddy_) {  // bytes is a whole buddy block (region_tokens_for)
    const int64_t slot = buddy_->allocate(bytes / bytes_per_token_);
    if (slot < 0) return -1;
    free_bytes_ -= bytes;
    return slot * bytes_per_token_;
  }
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
  if (buddy_) {
    buddy_->release(addr / bytes_per_token_, bytes / bytes_per_token_);
    return;
  }
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
  if (buddy_) return false;  // a buddy block never extends: the request moves
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
  if (buddy_) return buddy_->largest_free_block() * bytes_per_token_;
  return by_size_.empty() ? 0 : by_size_.rbegin()->first;
}

AllocResult ContiguousStore::fail(int64_t wanted) const {
  const OomReason why = free_bytes_ >= wanted ? OomReason::kFragmentation : OomReason::kCapacity;
  return AllocResult::failure(why, wanted, free_bytes_, largest_hole_bytes());
}

void ContiguousStore::account(const Req& r, int sign) {
  sums_.account(r.tokens, r.reserved_tokens, r.max_total, sign);
  reserved_tokens_ += sign * r.reserved_tokens;
  region_tokens_ += sign * r.region_tokens;
}

AllocResult ContiguousStore::allocate(RequestId request, int64_t prompt_tokens,
                                      int64_t max_total_tokens, const PrefixHashes&) {
  KVSIM_CHECK(!holds(request), "request {} already holds KV", request);
  KVSIM_CHECK(prompt_tokens >= 1 && prompt_tokens <= max_total_tokens,
              "request {}: prompt {} max_total {}", request, prompt_tokens, max_total_tokens);
  const int64_t reserve = reservation_tokens_for(prompt_tokens, max_total_tokens);
  const int64_t region = region_tokens_for(reserve);
  const int64_t wanted = region * bytes_per_token_;
  last_request_bytes_ = wanted;
  if (reserve_ == ReservePolicy::kMaxLen && max_total_tokens > max_len_) {
    return AllocResult::failure(OomReason::kTooLong, max_total_tokens * bytes_per_token_,
                                free_bytes_, largest_hole_bytes());
  }
  const int64_t addr = carve(wanted);
  if (addr < 0) return fail(wanted);
  Req r{addr, reserve, prompt_tokens, max_total_tokens, region};
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
    next.reserved_tokens =
        reserve_ == ReservePolicy::kPow2 ? pow2_at_least(new_total_tokens) : new_total_tokens;
    next.region_tokens = region_tokens_for(next.reserved_tokens);
    const int64_t old_bytes = r.region_tokens * bytes_per_token_;
    const int64_t new_bytes = next.region_tokens * bytes_per_token_;
    last_request_bytes_ = new_bytes;
    // A buddy block with room past the old reservation keeps the request in place.
    if (new_bytes > old_bytes && !try_extend(r.addr, old_bytes, new_bytes)) {
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
  give_back(r.addr, r.region_tokens * bytes_per_token_);
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
                         region_tokens_ * bytes_per_token_);
  u.rounding_bytes = (region_tokens_ - reserved_tokens_) * bytes_per_token_;
  u.capacity_bytes = arena_bytes_;
  u.free_bytes = free_bytes_;
  // Holes too small for the most recent request size: free but unusable for it.
  if (buddy_) {
    if (!requests_.empty() && last_request_bytes_ > 0) {
      u.external_bytes =
          buddy_->free_units_below(last_request_bytes_ / bytes_per_token_) * bytes_per_token_;
    }
  } else if (!requests_.empty() && last_request_bytes_ > 0) {
    for (auto s = by_size_.begin(); s != by_size_.end() && s->first < last_request_bytes_; ++s) {
      u.external_bytes += s->first;
    }
  }
  u.requests = static_cast<int64_t>(requests_.size());
  return u;
}

void ContiguousStore::check_invariants() const {
  TokenSums sums;
  int64_t reserved = 0;
  int64_t regions = 0;
  for (const auto& [id, r] : requests_) {
    KVSIM_CHECK(r.tokens >= 1 && r.tokens <= r.reserved_tokens, "request {}: {} tokens in {}", id,
                r.tokens, r.reserved_tokens);
    KVSIM_CHECK(r.region_tokens == region_tokens_for(r.reserved_tokens),
                "request {}: region of {} tokens for a reservation of {}", id, r.region_tokens,
                r.reserved_tokens);
    sums.account(r.tokens, r.reserved_tokens, r.max_total, +1);
    reserved += r.reserved_tokens;
    regions += r.region_tokens;
  }
  KVSIM_CHECK(sums == sums_ && reserved == reserved_tokens_ && regions == region_tokens_,
              "token sums disagree with the tracked ones");
  if (buddy_) {
    // Held blocks and the buddy's free blocks cover the arena exactly, without overlap.
    buddy_->check_invariants();
    std::map<int64_t, int64_t> held;  // slot -> slots
    for (const auto& [id, r] : requests_) {
      const int64_t slot = r.addr / bytes_per_token_;
      KVSIM_CHECK(r.addr % bytes_per_token_ == 0 && slot % r.region_tokens == 0,
                  "request {}: buddy block of {} slots at slot {} is not aligned", id,
                  r.region_tokens, slot);
      KVSIM_CHECK(held.emplace(slot, r.region_tokens).second, "request {} shares slot {}", id,
                  slot);
    }
    int64_t end = 0;
    for (const auto& [slot, n] : held) {
      KVSIM_CHECK(slot >= end, "held buddy blocks overlap at slot {}", slot);
      end = slot + n;
    }
    KVSIM_CHECK(buddy_->free_units() * bytes_per_token_ == free_bytes_ &&
                    free_bytes_ + region_tokens_ * bytes_per_token_ == arena_bytes_,
                "buddy free {} slots, held {}, arena {} bytes", buddy_->free_units(),
                region_tokens_, arena_bytes_);
    return;
  }
  // Regions and holes tile the arena exactly, without overlap; holes are merged.
  std::map<int64_t, int64_t> pieces = holes_;
  for (const auto& [id, r] : requests_) {
    KVSIM_CHECK(pieces.emplace(r.addr, r.region_tokens * bytes_per_token_).second,
                "request {} shares address {}", id, r.addr);
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
}

}  // namespace kvsim
