#include "sim/serving/kv_ledger.h"

#include "core/check.h"

namespace kvsim {

AllocResult KvLedger::grow_decode(RequestState& r, int64_t target, bool long_window) {
  const int64_t id = r.spec.id;
  AllocResult a = pool_.ensure_kv(id, target);
  if (a && deferral_ != nullptr) {
    r.kv_tokens = pool_.kv().tokens(id);
    r.kv_room = long_window ? deferral_->open_long(id) : deferral_->open(id);
    r.kv_long = long_window;
    r.kv_swaps = long_window && deferral_->long_window_swaps(id);
  }
  return a;
}

void KvLedger::report() {
  if (unreported_ == 0) return;
  deferral_->add(unreported_);
  unreported_ = 0;
}

void KvLedger::settle(RequestState& r) {
  report();                      // the store's totals first, so any snapshot it takes is whole
  if (r.kv_tokens == 0) return;  // no window open
  deferral_->settle(r.spec.id, r.kv_deferred);
  KVSIM_CHECK(pool_.kv().tokens(r.spec.id) == r.kv_tokens,
              "request {}: the engine counted {} KV tokens, the store holds {}", r.spec.id,
              r.kv_tokens, pool_.kv().tokens(r.spec.id));
  r.kv_deferred = 0;
  forget(r);
}

int64_t KvLedger::release(RequestState& r) {
  settle(r);
  const int64_t tokens = pool_.kv().tokens(r.spec.id);
  free_kv(r);
  forget(r);
  return tokens;
}

void KvLedger::release_if_held(RequestState& r) {
  if (pool_.kv().holds(r.spec.id)) {
    settle(r);
    free_kv(r);
  }
  forget(r);
}

}  // namespace kvsim
