// Collectives in the latency model (docs/latency.md "Collectives"): message bytes by hand, the
// measured curves at their points, graph or eager, P2P on or off, derived curves where nothing
// was measured. Curve values are the rows of ../shared/reference/measured/collectives (quoted
// in microseconds as models/catalog/collectives.yaml keeps them, 4 significant digits).
#include <catch2/catch.hpp>

#include "models/latency/collectives.h"
#include "tests/latency/latency_test_util.h"

using namespace kvsim;
using kvsim::test::decode_batch;
using kvsim::test::find_op;
using kvsim::test::prefill_batch;

namespace {

LatencyModel build(const char* model, const char* gpu, Parallelism par,
                   CollectiveSettings settings = {}) {
  const GpuSpec& g = Catalog::builtin().gpu(gpu);
  LatencyModel lm(Catalog::builtin().model(model), g, default_profile(g), AttentionKind::kFlash,
                  par);
  lm.set_collective_settings(settings);
  return lm;
}

const CollectiveCurve& curve(const char* gpu, CollectiveOp op, bool graph, int world,
                             bool p2p = true) {
  const CollectiveCurve* c = CollectiveTables::builtin().find(gpu, op, graph, world, p2p);
  REQUIRE(c != nullptr);
  return *c;
}

}  // namespace

TEST_CASE("a curve reads its measured points and interpolates linearly in bytes between them",
          "[collectives]") {
  // H100 SXM, vLLM 0.24 graph, TP 4, 4,194,304 bf16 elements = 8,388,608 B: the CSV row says
  // 0.05353024 ms; the catalog keeps 53.53 us (rounding: at most 0.05%).
  const CollectiveCurve& h100 = curve("h100-sxm", CollectiveOp::kAllReduce, true, 4);
  CHECK(h100.seconds(8'388'608) == Approx(53.53024e-6).epsilon(5e-4));
  // RTX PRO 6000, vLLM 0.24 graph, TP 2: 4.532 us at 4,096 B and 4.545 us at 8,192 B; halfway,
  // 6,144 B: 4.5385 us. Below the first point (256 B: 4.266 us) the floor; above the last the
  // last segment goes on.
  const CollectiveCurve& rtx = curve("rtx-pro-6000", CollectiveOp::kAllReduce, true, 2);
  CHECK(rtx.seconds(6144) == Approx(4.5385e-6).epsilon(1e-9));
  CHECK(rtx.seconds(1) == Approx(4.266e-6).epsilon(1e-9));
  const auto& p = rtx.points;
  const double past = p.back().first * 2;
  const double slope =
      (p.back().second - p[p.size() - 2].second) / (p.back().first - p[p.size() - 2].first);
  CHECK(rtx.seconds(past) == Approx(p.back().second + slope * p.back().first).epsilon(1e-12));
  // The series measured without P2P (vLLM 0.19): 19.08 us at 8,192 B, 4.2x the P2P run's.
  CHECK(curve("rtx-pro-6000", CollectiveOp::kAllReduce, true, 2, false).seconds(8192) ==
        Approx(19.08e-6).epsilon(1e-9));
}

TEST_CASE("the all-reduce message is tokens x hidden x 2 bytes, twice per layer, on vLLM's path",
          "[collectives]") {
  // Llama-3-70B (80 layers, hidden 8192) on 4 x H100, a 512-token prefill: 512 x 8192 x 2 =
  // 8,388,608 B per call, 160 calls. 8 MiB is not below the custom cap (8 MiB): torch symm-mem.
  // 512 tokens <= the capture size 512: a CUDA graph, so the graph curve: 53.53 us a call.
  const auto it = build("llama-3-70b", "h100-sxm", Parallelism{4, 1}).iteration(prefill_batch(512));
  const OpCost& ar = find_op(it, "allreduce");
  CHECK(ar.comm.message_bytes == 8'388'608.0);
  CHECK(ar.comm.calls == 160.0);
  CHECK(ar.comm.path == AllReducePath::kSymmMem);
  CHECK(ar.comm.graph);
  CHECK(ar.comm.source == CommSource::kMeasured);
  CHECK(ar.seconds == Approx(160 * 53.53e-6).epsilon(1e-9));
  // The ring traffic each GPU moves stays the byte count: 2 x 3/4 x 8,388,608 x 160.
  CHECK(ar.bytes == Approx(2.0 * 3 / 4 * 8'388'608 * 160));
  // 513 tokens are past the capture size: eager (8,404,992 B, between 8,388,608 and 16,777,216).
  const auto eager =
      build("llama-3-70b", "h100-sxm", Parallelism{4, 1}).iteration(prefill_batch(513));
  CHECK_FALSE(find_op(eager, "allreduce").comm.graph);
}

TEST_CASE("decode all-reduces on two PCIe GPUs: custom one-shot with P2P, NCCL without",
          "[collectives]") {
  // Llama-3-8B (32 layers, hidden 4096), 10 decode sequences on 2 x RTX PRO 6000: 10 x 4096 x 2
  // = 81,920 B per call, 64 calls; between 65,536 B (6.187 us) and 131,072 B (8.18 us):
  // 6.187 + 1.993 x 16,384 / 65,536 = 6.68525 us.
  const BatchShape batch = decode_batch(std::vector<int64_t>(10, 100));
  const auto on = build("llama-3-8b", "rtx-pro-6000", Parallelism{2, 1}).iteration(batch);
  const OpCost& a = find_op(on, "allreduce");
  CHECK(a.comm.path == AllReducePath::kCustomOneShot);
  CHECK(a.comm.message_bytes == 81'920.0);
  CHECK(a.seconds == Approx(64 * 6.68525e-6).epsilon(1e-9));
  // engine p2p: off: NCCL, timed on the no-P2P series: 22.27 + 5.25 x 0.25 = 23.5825 us a call.
  CollectiveSettings off;
  off.p2p = P2pSetting::kOff;
  const auto no = build("llama-3-8b", "rtx-pro-6000", Parallelism{2, 1}, off).iteration(batch);
  const OpCost& b = find_op(no, "allreduce");
  CHECK(b.comm.path == AllReducePath::kNccl);
  CHECK(b.comm.source == CommSource::kNoP2p);
  CHECK(b.seconds == Approx(64 * 23.5825e-6).epsilon(1e-9));
  // --enforce-eager: the eager curve, whose floor is vLLM's copy-in and launch (~20 us).
  CollectiveSettings eager;
  eager.enforce_eager = true;
  const auto e = build("llama-3-8b", "rtx-pro-6000", Parallelism{2, 1}, eager).iteration(batch);
  CHECK_FALSE(find_op(e, "allreduce").comm.graph);
  CHECK(find_op(e, "allreduce").seconds > 64 * 20e-6);
}

TEST_CASE("a GPU with no measurement gets the derived link formula, marked derived",
          "[collectives]") {
  // A40: not in the measured set. The derived all-reduce is the profile's latency plus the ring
  // traffic over the link, as before the curves.
  const auto it = build("llama-3-8b", "a40", Parallelism{2, 1}).iteration(prefill_batch(100));
  const OpCost& ar = find_op(it, "allreduce");
  CHECK(ar.comm.source == CommSource::kDerived);
  CHECK(comm_source_name(ar.comm.source) == "derived");
  // 2 x 32 calls, each the built-in profile's 4 us launch plus its 10 us all-reduce latency.
  CHECK(ar.overhead_s == Approx(64 * 14e-6));
  // The same model on a measured GPU reads its curve.
  CHECK(find_op(build("llama-3-70b", "h100-sxm", Parallelism{2, 1}).iteration(prefill_batch(10)),
                "allreduce")
            .comm.source == CommSource::kMeasured);
}

TEST_CASE("EP all2all (allgather_reducescatter): d x tokens x (hidden x 2 + top-k x 8) gathered",
          "[collectives]") {
  // DeepSeek-V3 (hidden 7168, top-8, 58 MoE layers), DP 8 with EP on H100: each replica decodes
  // 4 sequences; the dispatch all-gathers the hidden states with their top-8 FP32 weights and
  // INT32 ids, 8 x 4 x (7168 x 2 + 8 x 8) = 460,800 B over the 8 ranks, the combine
  // reduce-scatters the outputs, 8 x 4 x 7168 x 2 = 458,752 B. nccl-tests, world 8: all_gather
  // 13.55 us at 262,144 B and 13.65 at 524,288 -> 13.55 + 0.10 x 198,656 / 262,144 =
  // 13.62578125 us; reduce_scatter 12.06 and 12.40 -> 12.06 + 0.34 x 0.75 = 12.315 us.
  const auto it = build("deepseek-v3", "h100-sxm", Parallelism{1, 1, 8, true})
                      .iteration(decode_batch({500, 500, 500, 500}));
  const OpCost& a = find_op(it, "all_to_all");
  CHECK(a.comm.message_bytes == 460'800.0);
  CHECK(a.comm.calls == 58.0);
  CHECK(a.seconds == Approx(58 * (13.62578125e-6 + 12.315e-6)).epsilon(1e-9));
  // Traffic: each rank receives 7/8 of each gathered buffer and sends as much back.
  CHECK(a.bytes == Approx(58 * (460'800.0 + 458'752.0) * 7 / 8));
}

TEST_CASE("PP sends the hidden states and the residual, TP-sliced, then all-gathers them",
          "[collectives]") {
  // Llama-3-8B (hidden 4096) on H100, TP 2 x PP 2, 1000 tokens: each tensor is 1000 x 4096 x 2 =
  // 8,192,000 B, each TP rank sends half (4,096,000 B); two tensors over one boundary.
  const auto it = build("llama-3-8b", "h100-sxm", Parallelism{2, 2}).iteration(prefill_batch(1000));
  const OpCost& s = find_op(it, "pp_send");
  CHECK(s.comm.message_bytes == 4'096'000.0);
  CHECK(s.bytes == 2 * 4'096'000.0);
  CHECK(s.comm.source == CommSource::kMeasured);
  // Vidur's H100 send/recv: 16.5 us at 3,129,344 B and 25 at 6,275,072 B -> 16.5 + 8.5 x 966,656 /
  // 3,145,728 = 19.1120 us; the all-gather of 8,192,000 B over 2 H100s: 27.01 at 4,194,304
  // and 36.27 at 8,388,608 -> 27.01 + 9.26 x 3,997,696 / 4,194,304 = 35.8358 us. Two tensors: 2 x
  // (19.1120 + 35.8358) = 109.8956 us.
  CHECK(s.seconds == Approx(109.8956e-6).epsilon(1e-5));
}

TEST_CASE("vLLM V0 runs a prefill's all-reduces eagerly; its decodes replay graphs up to 256",
          "[collectives]") {
  // Llama-3-70B (80 layers, hidden 8192) on 8 x H100, a 100-token prefill: 100 x 8192 x 2 =
  // 1,638,400 B a call, 160 calls, torch symm-mem (above 8 GPUs' 256 KiB custom cap). V1: 100 <=
  // 512 tokens, a piecewise graph: 14.97 us at 1,048,576 B and 19.39 at 2,097,152 -> 14.97 +
  // 4.42 x 589,824 / 1,048,576 = 17.45625 us. V0 (graph_decode_only): the eager curve, 42.07 and
  // 41.42 -> 42.07 - 0.65 x 0.5625 = 41.704375 us.
  CollectiveSettings v0;
  v0.graph_decode_only = true;
  v0.max_graph_tokens = v0_max_graph_tokens(256);
  CHECK(v0.max_graph_tokens == 256);
  CHECK(v0_max_graph_tokens(100) == 104);
  CHECK(v0_max_graph_tokens(1000) == 256);
  const OpCost v1 =
      find_op(build("llama-3-70b", "h100-sxm", Parallelism{8, 1}).iteration(prefill_batch(100)),
              "allreduce");
  CHECK(v1.comm.graph);
  CHECK(v1.seconds == Approx(160 * 17.45625e-6).epsilon(1e-9));
  const LatencyModel lm = build("llama-3-70b", "h100-sxm", Parallelism{8, 1}, v0);
  const OpCost pre = find_op(lm.iteration(prefill_batch(100)), "allreduce");
  CHECK_FALSE(pre.comm.graph);
  CHECK(pre.seconds == Approx(160 * 41.704375e-6).epsilon(1e-9));
  // 100 decodes (the same message) replay a graph under V0 too.
  const OpCost dec =
      find_op(lm.iteration(decode_batch(std::vector<int64_t>(100, 500))), "allreduce");
  CHECK(dec.comm.graph);
  CHECK(dec.seconds == Approx(160 * 17.45625e-6).epsilon(1e-9));
  // The engine's totals path takes the prefill's eager collectives as the full costing does.
  CHECK(lm.iteration(prefill_batch(100), OpDetail::kTotals).seconds ==
        lm.iteration(prefill_batch(100)).seconds);
}
