// Which all-reduce implementation vLLM runs a tensor-parallel all-reduce with, given the GPU, the
// group and the message (docs/latency.md "Collectives"): a pure function of the facts vLLM's
// CudaCommunicator decides on, so tests can check each rule by hand.
#pragma once

#include <cstdint>
#include <string_view>

namespace kvsim {

enum class AllReducePath {
  kCustomOneShot,  // vLLM's custom all-reduce, one-shot kernel (csrc/custom_all_reduce.cuh)
  kCustomTwoShot,  // the same, two-shot (reduce-scatter then all-gather through peer buffers)
  kSymmMem,        // torch symmetric memory (vllm/distributed/device_communicators/symm_mem.py)
  kNccl,           // PyNCCL (pynccl.py), the fallback
};

std::string_view path_name(AllReducePath p);

// What vLLM knows when it picks the path.
struct AllReduceCase {
  int compute_capability = 0;  // major * 10 + minor (90 Hopper, 100 B200/GB200)
  bool nvlink = false;         // every pair NVLink-connected (current_platform.is_fully_connected)
  bool nvswitch = false;       // multicast-capable NVLink fabric (symm-mem's rendezvous needs it)
  int world = 1;               // tensor-parallel group size
  bool p2p = true;             // CUDA peer access works between the GPUs (gpu_p2p_access_check)
  int64_t bytes = 0;           // the message: tokens x hidden x 2 (bf16)
  bool disable_custom_all_reduce = false;  // --disable-custom-all-reduce
};

// vLLM's custom all-reduce buffer (CustomAllreduce max_size default, 8 MiB).
inline constexpr int64_t kCustomAllReduceMaxBytes = int64_t{8} << 20;

// The custom all-reduce's size cap: 8 MiB, lowered to CUSTOM_ALL_REDUCE_MAX_SIZES[cc][world]
// when the torch symm-mem communicator is active (all_reduce_utils.py); 0: none for this world.
int64_t custom_allreduce_cap(const AllReduceCase& c);
// Torch symm-mem's cap (SYMM_MEM_ALL_REDUCE_MAX_SIZES[cc][world]); 0: symm-mem is not created.
int64_t symm_mem_cap(const AllReduceCase& c);

// The path CudaCommunicator.all_reduce takes: custom AR if it exists for the group and
// should_custom_ar accepts the message, else torch symm-mem if it accepts it, else PyNCCL.
AllReducePath select_allreduce_path(const AllReduceCase& c);

}  // namespace kvsim

namespace kvsim {

// Where a collective's time came from (shown in `kvsim latency --verbose`).
enum class CommSource : uint8_t {
  kNone,           // not a collective
  kMeasured,       // the GPU's measured vLLM all-reduce (or send/recv, all-gather) curve
  kNcclTests,      // the GPU's nccl-tests curve (vLLM's path differs from the measured host's)
  kNoP2p,          // a curve measured without GPU peer-to-peer access
  kFromAllReduce,  // an all-gather / reduce-scatter timed as the measured all-reduce of half its
                   // bytes
  kDerived,        // no measurement: latency floor plus bytes over the catalog link (profile)
};
std::string_view comm_source_name(CommSource s);

// A collective operation's path and per-call message (OpCost::comm).
struct CommDetail {
  CommSource source = CommSource::kNone;
  AllReducePath path = AllReducePath::kNccl;  // all-reduces only
  bool graph = false;                         // timed as replayed in a CUDA graph
  double message_bytes = 0;                   // one call's message (see each operation)
  double calls = 0;                           // calls per iteration
};

}  // namespace kvsim
