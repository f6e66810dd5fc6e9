#include "sim/metrics/in_order_rows.h"

#include <algorithm>
#include <bit>

namespace kvsim {

void InOrderRows::wait(int64_t id, std::string_view row) {
  if (id < next_) {
    late_.emplace(id, std::string(row));
    return;
  }
  const int64_t ahead = id - next_;
  if (ahead >= kMaxRingWindow) {
    far_.emplace(id, std::string(row));
    return;
  }
  if (static_cast<size_t>(ahead) >= ring_id_.size()) grow_ring(ahead + 1);
  const size_t slot = static_cast<size_t>(id) & mask_;
  if (ring_id_[slot] == id) return;  // a repeated id keeps its first row
  ring_id_[slot] = id;
  ring_[slot].assign(row);
}

// Every waiting id is in [next_, next_ + size): after growing to a power of two >= window they
// still have distinct slots.
void InOrderRows::grow_ring(int64_t window) {
  const size_t size = std::bit_ceil(std::max<size_t>(static_cast<size_t>(window), 64));
  std::vector<std::string> ring(size);
  std::vector<int64_t> ids(size, -1);
  for (size_t slot = 0; slot < ring_id_.size(); ++slot) {
    if (ring_id_[slot] < 0) continue;
    const size_t to = static_cast<size_t>(ring_id_[slot]) & (size - 1);
    ids[to] = ring_id_[slot];
    ring[to] = std::move(ring_[slot]);
  }
  ring_ = std::move(ring);
  ring_id_ = std::move(ids);
  mask_ = size - 1;
}

}  // namespace kvsim

namespace kvsim {

void InOrderRows::leave_behind(int64_t id) {
  const size_t slot = static_cast<size_t>(id) & mask_;
  late_.emplace(id, std::move(ring_[slot]));
  ring_id_[slot] = -1;
}

}  // namespace kvsim
