#include "models/latency/collective_path.h"

#include <algorithm>

#include "core/units.h"

namespace kvsim {

namespace {

// Whether CustomAllreduce.__init__ leaves the communicator enabled for this group: world size
// 2, 4, 6 or 8 (one node), not more than two GPUs unless all pairs are NVLinked, working P2P.
bool custom_allreduce_exists(const AllReduceCase& c) {
  if (c.disable_custom_all_reduce || !c.p2p) return false;
  if (c.world != 2 && c.world != 4 && c.world != 6 && c.world != 8) return false;
  return c.world == 2 || c.nvlink;
}

// A per-world-size table of (cc, world) -> bytes; 0 when absent.
int64_t world_entry(int world, int64_t w2, int64_t w4, int64_t w6, int64_t w8) {
  switch (world) {
    case 2: return w2;
    case 4: return w4;
    case 6: return w6;
    case 8: return w8;
    default: return 0;
  }
}

}  // namespace

std::string_view path_name(AllReducePath p) {
  switch (p) {
    case AllReducePath::kCustomOneShot: return "custom_1shot";
    case AllReducePath::kCustomTwoShot: return "custom_2shot";
    case AllReducePath::kSymmMem: return "symm_mem";
    case AllReducePath::kNccl: return "nccl";
  }
  return "nccl";
}

int64_t symm_mem_cap(const AllReduceCase& c) {
  // SymmMemCommunicator: CUDA cc 9.0/10.0/10.3 only, and it disables itself when the
  // rendezvous finds no multicast support (no NVSwitch: never on PCIe cards).
  if (!c.nvswitch) return 0;
  switch (c.compute_capability) {
    case 90: return world_entry(c.world, 64 * kMiB, 32 * kMiB, 64 * kMiB, 64 * kMiB);
    case 100: return world_entry(c.world, 8 * kMiB, 32 * kMiB, 128 * kMiB, 128 * kMiB);
    case 103: return world_entry(c.world, 4 * kMiB, 32 * kMiB, 32 * kMiB, 64 * kMiB);
    default: return 0;
  }
}

int64_t custom_allreduce_cap(const AllReduceCase& c) {
  if (!custom_allreduce_exists(c)) return 0;
  if (symm_mem_cap(c) == 0) return kCustomAllReduceMaxBytes;
  int64_t table = 0;
  switch (c.compute_capability) {
    case 90: table = world_entry(c.world, 64 * kMiB, 32 * kMiB, 512 * kKiB, 256 * kKiB); break;
    case 100: table = world_entry(c.world, 2 * kMiB, 2 * kMiB, kMiB, kMiB); break;
    case 103: table = world_entry(c.world, 4 * kMiB, 4 * kMiB, 8 * kMiB, 4 * kMiB); break;
    default: table = kCustomAllReduceMaxBytes;
  }
  return std::min(kCustomAllReduceMaxBytes, table);
}

AllReducePath select_allreduce_path(const AllReduceCase& c) {
  // should_custom_ar: size a multiple of 16 and strictly below the cap.
  const int64_t ca_cap = custom_allreduce_cap(c);
  if (ca_cap > 0 && c.bytes % 16 == 0 && c.bytes < ca_cap) {
    // CustomAllreduce::allreduce: two GPUs always one-shot; NVLinked groups one-shot below
    // 512 KiB (up to 4 GPUs) or 256 KiB (up to 8), else two-shot.
    if (c.world == 2) return AllReducePath::kCustomOneShot;
    const bool one =
        (c.world <= 4 && c.bytes < 512 * kKiB) || (c.world <= 8 && c.bytes < 256 * kKiB);
    return one ? AllReducePath::kCustomOneShot : AllReducePath::kCustomTwoShot;
  }
  // should_use_symm_mem: bf16 (kvsim's activations), size a multiple of 4 and within the cap.
  if (const int64_t sm_cap = symm_mem_cap(c); sm_cap > 0 && c.bytes % 4 == 0 && c.bytes <= sm_cap) {
    return AllReducePath::kSymmMem;
  }
  return AllReducePath::kNccl;
}

}  // namespace kvsim

namespace kvsim {

std::string_view comm_source_name(CommSource s) {
  switch (s) {
    case CommSource::kNone: return "-";
    case CommSource::kMeasured: return "measured";
    case CommSource::kNcclTests: return "nccl-tests";
    case CommSource::kNoP2p: return "measured-no-p2p";
    case CommSource::kDerived: return "derived";
  }
  return "-";
}

}  // namespace kvsim
