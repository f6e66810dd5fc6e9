// The expert-parallel exchange of data-parallel ranks (docs/latency.md "Collectives"), as vLLM's
// default allgather_reducescatter backend runs it (AgRsAll2AllManager, all2all.py): the dispatch
// gathers the ranks' own token counts (DPMetadata) x (hidden x 2 + top-k x (4 + 4)) bytes, the
// hidden states with their FP32 routing weights and INT32 expert ids
// (MoEPrepareAndFinalizeNaiveDPEPModular.prepare), and the combine reduce-scatters their
// hidden x 2-byte outputs, not top-k copies; on a host without P2P, where no all-gather was
// measured, each collective is timed as the measured no-P2P all-reduce of half its bytes. Curve
// values are quoted in microseconds as models/catalog/collectives.yaml keeps them.
#include <catch2/catch.hpp>

#include "models/latency/collectives.h"
#include "tests/latency/latency_test_util.h"

using namespace kvsim;
using kvsim::test::decode_batch;
using kvsim::test::find_op;

namespace {

LatencyModel qwen3_moe_dp2(const char* gpu, P2pSetting p2p) {
  const GpuSpec& g = Catalog::builtin().gpu(gpu);
  LatencyModel lm(Catalog::builtin().model("qwen3-30b-a3b"), g, default_profile(g),
                  AttentionKind::kFlash, Parallelism{1, 1, 2, true});
  CollectiveSettings settings;
  settings.p2p = p2p;
  lm.set_collective_settings(settings);
  return lm;
}

BatchShape decodes(int64_t n, int64_t group_tokens) {
  BatchShape b;
  b.decode_seqs = n;
  b.decode_context_tokens = n * 100;
  b.block_tokens = 16;
  b.moe_group_tokens = group_tokens;
  return b;
}

}  // namespace

TEST_CASE("EP exchange without P2P: each collective is the no-P2P all-reduce of half its bytes",
          "[collectives][ep]") {
  // Qwen3-30B-A3B (hidden 2048, top-8, 48 MoE layers), DP 2 + EP on 2 x RTX PRO 6000 without
  // P2P; both ranks decode 64 sequences (a CUDA graph: 64 <= 512). Dispatched: 128 rows of
  // hidden states and routing, 128 x (2048 x 2 + 8 x 8) = 532,480 B; combined: the outputs,
  // 128 x 2048 x 2 = 524,288 B. No all-gather was measured without P2P; a ring all-gather of S
  // bytes over 2 ranks moves S/2 through each, as the all-reduce of S/2 does. The vLLM 0.19
  // no-P2P graph curve: 39.32 us at 262,144 B, 55.54 at 524,288, so the dispatch (266,240 B) is
  // 39.32 + 16.22 x 4,096 / 262,144 = 39.5734375 us and the combine 39.32 us.
  const auto lm = qwen3_moe_dp2("rtx-pro-6000", P2pSetting::kOff);
  const auto it = lm.iteration(decodes(64, 128));
  const OpCost& a = find_op(it, "all_to_all");
  CHECK(a.comm.source == CommSource::kFromAllReduce);
  CHECK(comm_source_name(a.comm.source) == "from-all-reduce");
  CHECK(a.comm.message_bytes == 532'480.0);
  CHECK(a.comm.graph);
  CHECK(a.seconds == Approx(48 * (39.5734375e-6 + 39.32e-6)).epsilon(1e-9));
  // Traffic: each rank receives the other's half of each buffer and sends as much back:
  // (532,480 + 524,288) / 2 = 528,384 B a layer.
  CHECK(a.bytes == Approx(48 * 528'384.0));
  // With P2P the same exchange reads the nccl-tests all-gather (23.95 us at 524,288 B, 31.23 at
  // 1,048,576: 23.95 + 7.28 x 8,192 / 524,288 = 24.06375 us at 532,480) and reduce-scatter
  // (22.16 us at 524,288 B, a measured point).
  // (The iteration is kept: find_op returns a reference into it.)
  const auto with_p2p = qwen3_moe_dp2("rtx-pro-6000", P2pSetting::kOn).iteration(decodes(64, 128));
  const OpCost& p = find_op(with_p2p, "all_to_all");
  CHECK(p.comm.source == CommSource::kNcclTests);
  CHECK(p.seconds == Approx(48 * (24.06375e-6 + 22.16e-6)).epsilon(1e-9));
}

TEST_CASE("EP exchange: the gathered rows are the ranks' own counts, not d x this rank's",
          "[collectives][ep]") {
  // Lockstep DP 2: this rank runs a 2,048-token prefill chunk, the other 128 decodes (above the
  // 512-token capture size: nobody pads, eager). all_gatherv gathers 2,048 + 128 = 2,176 rows,
  // not 2 x 2,048: 2,176 x (2048 x 2 + 8 x 8) = 9,052,160 B of hidden states and routing;
  // reduce_scatterv returns 2,176 x 2048 x 2 = 8,912,896 B. Without P2P each collective is the
  // eager no-P2P all-reduce of half its bytes, 299.9 us at 4,194,304 and 573.3 at 8,388,608:
  // dispatch (4,526,080 B) 299.9 + 273.4 x 331,776 / 4,194,304 = 321.5263671875 us, combine
  // (4,456,448 B) 299.9 + 273.4 x 262,144 / 4,194,304 = 316.9875 us.
  const auto lm = qwen3_moe_dp2("rtx-pro-6000", P2pSetting::kOff);
  BatchShape b = kvsim::test::prefill_batch(2048);
  b.moe_group_tokens = 2176;
  const auto it = lm.iteration(b);
  const OpCost& a = find_op(it, "all_to_all");
  CHECK(a.comm.message_bytes == 9'052'160.0);
  CHECK_FALSE(a.comm.graph);
  CHECK(a.seconds == Approx(48 * (321.5263671875e-6 + 316.9875e-6)).epsilon(1e-6));
  // Without a group (the latency CLI, independent replicas) the other rank is taken alike:
  // 2 x 2,048 rows.
  const auto ungrouped = lm.iteration(kvsim::test::prefill_batch(2048));
  const OpCost& alike = find_op(ungrouped, "all_to_all");
  CHECK(alike.comm.message_bytes == 2 * 2048 * (2048 * 2 + 8 * 8.0));
}

TEST_CASE("EP exchange on a GPU with no curve: the gathered buffers over the link, derived",
          "[collectives][ep]") {
  // A40: nothing measured. Per MoE layer the (d - 1)/d = 1/2 of the dispatched 2 x 10 x (2048 x
  // 2 + 8 x 8) = 83,200 B and of the combined 2 x 10 x 2048 x 2 = 81,920 B crosses the link:
  // 82,560 B of traffic, two calls' fixed latency.
  const auto it = qwen3_moe_dp2("a40", P2pSetting::kAuto).iteration(decodes(10, 0));
  const OpCost& a = find_op(it, "all_to_all");
  CHECK(a.comm.source == CommSource::kDerived);
  CHECK(a.comm.message_bytes == 83'200.0);
  CHECK(a.bytes == Approx(48 * 82'560.0));
  // Built-in profile: 2 launches x (4 us + the 10 us all-reduce latency) per MoE layer.
  CHECK(a.overhead_s == Approx(48 * 2 * 14e-6));
}
