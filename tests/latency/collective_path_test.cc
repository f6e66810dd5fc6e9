// vLLM's choice of all-reduce path (models/latency/collective_path.h), case by case against the
// rules of vllm/distributed/device_communicators/cuda_communicator.py
// (CudaCommunicator.all_reduce), custom_all_reduce.py (CustomAllreduce, should_custom_ar),
// all_reduce_utils.py (the size tables), symm_mem.py and csrc/custom_all_reduce.cuh (one-shot or
// two-shot).
#include <catch2/catch.hpp>

#include "models/latency/collective_path.h"

using namespace kvsim;

namespace {

constexpr int64_t KiB = 1024, MiB = 1024 * 1024;

// Two to eight PCIe cards (no NVLink), P2P working: RTX PRO 6000 Blackwell, cc 12.0.
AllReduceCase pcie(int world, int64_t bytes, bool p2p = true) {
  return {.compute_capability = 120,
          .nvlink = false,
          .nvswitch = false,
          .world = world,
          .p2p = p2p,
          .bytes = bytes};
}
// An NVSwitch node (HGX): every pair NVLinked, multicast available.
AllReduceCase nvswitch(int cc, int world, int64_t bytes) {
  return {.compute_capability = cc,
          .nvlink = true,
          .nvswitch = true,
          .world = world,
          .p2p = true,
          .bytes = bytes};
}

}  // namespace

TEST_CASE("two PCIe GPUs with P2P run the custom one-shot kernel below 8 MiB", "[collectives]") {
  // Custom AR exists for world 2 without NVLink; no symm-mem on PCIe, so the cap is the 8 MiB
  // buffer, and should_custom_ar wants size < max_size (strictly).
  CHECK(select_allreduce_path(pcie(2, 4 * MiB)) == AllReducePath::kCustomOneShot);
  CHECK(select_allreduce_path(pcie(2, 8 * MiB - 16)) == AllReducePath::kCustomOneShot);
  CHECK(select_allreduce_path(pcie(2, 8 * MiB)) == AllReducePath::kNccl);
  CHECK(custom_allreduce_cap(pcie(2, 0)) == 8 * MiB);
  // A size not a multiple of 16 bytes is refused by should_custom_ar.
  CHECK(select_allreduce_path(pcie(2, 8 * KiB + 8)) == AllReducePath::kNccl);
}

TEST_CASE("more than two PCIe GPUs, or no P2P, use NCCL", "[collectives]") {
  // "Custom allreduce is disabled ... not supported on more than two PCIe-only GPUs".
  CHECK(select_allreduce_path(pcie(4, 64 * KiB)) == AllReducePath::kNccl);
  CHECK(select_allreduce_path(pcie(8, 8 * KiB)) == AllReducePath::kNccl);
  // The P2P check fails: custom AR off; symm-mem never exists on PCIe.
  CHECK(select_allreduce_path(pcie(2, 8 * KiB, false)) == AllReducePath::kNccl);
  // World 3 is not among 2, 4, 6, 8.
  AllReduceCase three = nvswitch(90, 3, 8 * KiB);
  CHECK(select_allreduce_path(three) == AllReducePath::kNccl);
}

TEST_CASE("H100 x8: custom AR below 256 KiB, torch symm-mem above, NCCL past 64 MiB",
          "[collectives]") {
  // sm90 world 8: custom cap min(8 MiB, 256 KiB) = 256 KiB (symm-mem is active), symm-mem up to
  // 64 MiB. 200 KiB: custom, one-shot (world <= 8 and < 256 KiB).
  CHECK(custom_allreduce_cap(nvswitch(90, 8, 0)) == 256 * KiB);
  CHECK(select_allreduce_path(nvswitch(90, 8, 200 * KiB)) == AllReducePath::kCustomOneShot);
  // 300 KiB: at or past the custom cap, within symm-mem's 64 MiB.
  CHECK(select_allreduce_path(nvswitch(90, 8, 300 * KiB)) == AllReducePath::kSymmMem);
  CHECK(select_allreduce_path(nvswitch(90, 8, 256 * KiB)) == AllReducePath::kSymmMem);
  CHECK(select_allreduce_path(nvswitch(90, 8, 64 * MiB)) == AllReducePath::kSymmMem);
  CHECK(select_allreduce_path(nvswitch(90, 8, 64 * MiB + 16)) == AllReducePath::kNccl);
}

TEST_CASE("H100 x4: one-shot below 512 KiB, two-shot to 8 MiB, symm-mem to 32 MiB",
          "[collectives]") {
  // sm90 world 4: custom cap min(8 MiB, 32 MiB) = 8 MiB; one-shot while world <= 4 and < 512 KiB.
  CHECK(select_allreduce_path(nvswitch(90, 4, 300 * KiB)) == AllReducePath::kCustomOneShot);
  CHECK(select_allreduce_path(nvswitch(90, 4, 512 * KiB)) == AllReducePath::kCustomTwoShot);
  CHECK(select_allreduce_path(nvswitch(90, 4, 8 * MiB - 16)) == AllReducePath::kCustomTwoShot);
  CHECK(select_allreduce_path(nvswitch(90, 4, 8 * MiB)) == AllReducePath::kSymmMem);
  CHECK(select_allreduce_path(nvswitch(90, 4, 40 * MiB)) == AllReducePath::kNccl);
}

TEST_CASE("A100 and B200 caps", "[collectives]") {
  // A100 (cc 8.0): no symm-mem table, so the custom cap stays 8 MiB; world 8 at 300 KiB is past
  // the 256 KiB one-shot limit: two-shot. 8 MiB: NCCL.
  CHECK(symm_mem_cap(nvswitch(80, 8, 0)) == 0);
  CHECK(select_allreduce_path(nvswitch(80, 8, 300 * KiB)) == AllReducePath::kCustomTwoShot);
  CHECK(select_allreduce_path(nvswitch(80, 8, 8 * MiB)) == AllReducePath::kNccl);
  // B200 (cc 10.0) world 8: custom cap 1 MiB, symm-mem to 128 MiB.
  CHECK(select_allreduce_path(nvswitch(100, 8, 1 * MiB - 16)) == AllReducePath::kCustomTwoShot);
  CHECK(select_allreduce_path(nvswitch(100, 8, 1 * MiB)) == AllReducePath::kSymmMem);
  CHECK(select_allreduce_path(nvswitch(100, 2, 2 * MiB)) == AllReducePath::kSymmMem);
}

TEST_CASE("disable_custom_all_reduce leaves torch symm-mem where it applies", "[collectives]") {
  // cuda_communicator.py creates the symm-mem communicator from VLLM_ALLREDUCE_USE_SYMM_MEM,
  // independently of the custom all-reduce switch.
  AllReduceCase h100 = nvswitch(90, 2, 8 * KiB);
  h100.disable_custom_all_reduce = true;
  CHECK(select_allreduce_path(h100) == AllReducePath::kSymmMem);
  AllReduceCase two_pcie = pcie(2, 8 * KiB);
  two_pcie.disable_custom_all_reduce = true;
  CHECK(select_allreduce_path(two_pcie) == AllReducePath::kNccl);
  CHECK(path_name(AllReducePath::kCustomOneShot) == "custom_1shot");
}
