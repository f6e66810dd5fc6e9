#include "models/latency/flash_tiles.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/check.h"

namespace kvsim {

int flash_block_n(double head_dim) { return head_dim <= 64 ? 256 : head_dim <= 128 ? 128 : 64; }

FlashTileWork flash_tile_work(const std::vector<PrefillChunk>& chunks, double n_decode,
                              double decode_context, double heads, double head_dim, int sms,
                              double window) {
  KVSIM_CHECK(heads >= 1 && sms >= 1, "flash tiles: {} heads, {} SMs", heads, sms);
  const double bn = flash_block_n(head_dim);
  // (KV tiles a CTA walks, CTAs with that many).
  std::vector<std::pair<double, double>> groups;
  for (const PrefillChunk& c : chunks) {
    const double q = static_cast<double>(c.tokens), ctx = static_cast<double>(c.context_tokens);
    const double blocks = std::ceil(q / kFlashBlockM);
    for (double b = 0; b < blocks; ++b) {
      // Rows b*BM .. min(q, (b+1)*BM) - 1 see the context and the chunk up to their last row;
      // with a window, only the keys within the first row's window onwards.
      const double first = b * kFlashBlockM, last = std::min(q, first + kFlashBlockM);
      double keys = ctx + last;
      if (window > 0) keys = std::min(keys, window - 1 + (last - first));
      groups.emplace_back(std::ceil(keys / bn), heads);
    }
  }
  if (n_decode > 0) {
    const double keys = window > 0 ? std::min(decode_context, window) : decode_context;
    groups.emplace_back(std::ceil(keys / bn), heads * n_decode);
  }
  std::sort(groups.begin(), groups.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  FlashTileWork w;
  double placed = 0;  // CTAs placed so far; a wave starts at every multiple of sms
  for (const auto& [tiles, count] : groups) {
    w.ctas += count;
    // Waves that start inside this group: each lasts this group's tiles (the longest left).
    const double starts = std::ceil((placed + count) / sms) - std::ceil(placed / sms);
    w.wave_blocks += starts * tiles;
    w.waves += starts;
    placed += count;
  }
  return w;
}

}  // namespace kvsim
