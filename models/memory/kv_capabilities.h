// Capability views of a KV store (KvStore::paged(), KvStore::deferred_growth()): narrow
// interfaces for what only some stores have, so KvStore itself carries no store-specific method,
// no sentinel value and no type test. A store that has a capability implements the interface and
// returns itself from the view; the others return nullptr.
#pragma once

#include <cstdint>

#include "models/memory/kv_store.h"

namespace kvsim {

// Capability view of a paged store (KvStore::paged()): its blocks, for a vLLM-style watermark
// guard, the latency model's block size and prefix-cache figures.
class PagedBlocks {
 public:
  virtual int64_t free_blocks() const = 0;
  virtual int64_t total_blocks() const = 0;
  virtual int64_t block_tokens() const = 0;
  virtual int64_t prefix_hit_blocks() const = 0;  // blocks shared through the prefix cache so far

 protected:
  ~PagedBlocks() = default;
};

// Capability view of a store that takes deferred growth (KvStore::deferred_growth()), the
// engine's decode fast path. open(request) opens the request's deferral window and returns its
// room: the tokens it may gain without a store call each (they fall inside the space it already
// holds and within its max_total_tokens, so each only turns a reservation token into a live one).
// The caller
//   1. reports the sum of such tokens over all requests with add() (usage() counts them at once);
//   2. closes a request's window with settle(request, tokens), handing its share over, before any
//      other call about that request (grow, tokens, release, ...), and after add() has covered it;
//   3. settles everything before check_invariants(), which requires outstanding() == 0.
// The store KVSIM_CHECKs the order: any other call about a request whose window is open is an
// InvariantError, as are settling a closed window, settling more than its room or more than add()
// reported, and adding more than the reservation. sim/serving/kv_ledger.h is the engine's side.
class DeferredGrowth {
 public:
  virtual int64_t open(RequestId request) = 0;  // Requires: held, window closed. Returns the room.
  virtual void add(int64_t tokens) = 0;
  virtual void settle(RequestId request, int64_t tokens) = 0;  // Requires: window open
  virtual int64_t outstanding() const = 0;  // tokens added and not yet settled

 protected:
  ~DeferredGrowth() = default;
};

}  // namespace kvsim
