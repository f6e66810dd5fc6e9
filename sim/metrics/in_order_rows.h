// requests.csv rows in id order. Request ids are dense from 0 in issue order and requests finish
// out of order, so a row waits only until every smaller id has finished: the rows waiting are
// the out-of-order window. They wait in a ring indexed by id whose strings keep their capacity
// (no allocation per row once the ring has grown to the window, unlike a map node and a string
// per row); ids the ring does not suit go to maps, so any id sequence gives the bytes a single
// id-ordered map would.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kvsim {

class InOrderRows {
 public:
  // A row ahead of the next id at most this far waits in the ring (past it: in a map), so a
  // sparse id cannot grow the ring without bound.
  static constexpr int64_t kMaxRingWindow = int64_t{1} << 20;

  // Hands `row` (and every row it unblocks) to sink(std::string_view) once every smaller id's
  // row has gone, as a map of waiting rows drained from its smallest id would: a row whose id
  // has already gone ("late"; a repeated id) waits for flush(), and while one waits no waiting
  // row is handed on (only a row whose id is the next one). A repeated waiting id keeps its
  // first row.
  template <typename Sink>
  void put(int64_t id, std::string_view row, Sink&& sink) {
    if (id != next_) return wait(id, row);
    if (!ring_id_.empty() && ring_id_[static_cast<size_t>(id) & mask_] == id) {
      leave_behind(id);  // a repeated id: its waiting row is left behind, as in a map
    } else if (!far_.empty() && far_.begin()->first == id) {
      late_.insert(far_.extract(far_.begin()));
    }
    sink(row);
    ++next_;
    if (!late_.empty()) return;  // the smallest waiting id is late: nothing drains
    for (;;) {
      const size_t slot = static_cast<size_t>(next_) & mask_;
      if (!ring_id_.empty() && ring_id_[slot] == next_) {
        sink(std::string_view(ring_[slot]));
        ring_id_[slot] = -1;
      } else if (!far_.empty() && far_.begin()->first == next_) {
        sink(std::string_view(far_.begin()->second));
        far_.erase(far_.begin());
      } else {
        break;
      }
      ++next_;
    }
  }

  // Hands every waiting row to sink in id order (ids never seen leave gaps) and empties.
  template <typename Sink>
  void flush(Sink&& sink) {
    std::map<int64_t, std::string> all = std::move(late_);
    all.merge(far_);
    for (size_t slot = 0; slot < ring_id_.size(); ++slot) {
      if (ring_id_[slot] >= 0) all.emplace(ring_id_[slot], std::move(ring_[slot]));
    }
    for (const auto& [id, row] : all) sink(std::string_view(row));
    *this = InOrderRows();
  }

 private:
  void wait(int64_t id, std::string_view row);
  void grow_ring(int64_t window);
  void leave_behind(int64_t id);  // the ring's row of `id` becomes late

  int64_t next_ = 0;
  std::vector<std::string> ring_;  // slot id & mask_ holds id's row when ring_id_[slot] == id
  std::vector<int64_t> ring_id_;   // -1: empty
  size_t mask_ = 0;
  std::map<int64_t, std::string> far_;   // ids >= next_ + kMaxRingWindow
  std::map<int64_t, std::string> late_;  // ids < next_ when they came
};

}  // namespace kvsim
