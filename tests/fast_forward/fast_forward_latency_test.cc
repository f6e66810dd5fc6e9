// The decode-step memo behind LatencyModel::iteration(batch, OpDetail::kTotals) (the engine's
// call in start_iteration and in the fast-forward): for a decode-only aggregate batch it costs
// decode attention alone and adds the other operations' figures from a per-batch-size memo, in
// the order the full costing adds them. The expected value is the full costing itself
// (OpDetail::kFull, which never uses the memo): every total must have the same bits, for every
// shape the engine can pass (tensor and pipeline parallel, MoE, a sliding window, eager
// attention, paged and contiguous KV, block sizes alternating so the memo is rebuilt).
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"

using namespace kvsim;

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

LatencyModel model_of(const std::string& name, AttentionKind a, int tp, int pp) {
  const Catalog& c = Catalog::builtin();
  const GpuSpec& g = c.gpu("a100-sxm4-80gb");
  return LatencyModel(c.model(name), g, default_profile(g), a, tp, pp);
}

}  // namespace

TEST_CASE("decode-step memo: iteration totals have the full costing's bits",
          "[engine][fast_forward][latency]") {
  struct Case {
    std::string model;
    AttentionKind attention;
    int tp, pp;
  };
  const std::vector<Case> cases = {
      {"llama-3-8b", AttentionKind::kFlash, 1, 1},   {"llama-2-7b", AttentionKind::kNative, 1, 1},
      {"llama-3-70b", AttentionKind::kFlash, 4, 1},  {"llama-3-70b", AttentionKind::kFlash, 2, 2},
      {"mixtral-8x7b", AttentionKind::kFlash, 2, 1}, {"mistral-7b", AttentionKind::kFlash, 1, 1},
  };
  for (const Case& c : cases) {
    const LatencyModel fast = model_of(c.model, c.attention, c.tp, c.pp);
    const LatencyModel full = model_of(c.model, c.attention, c.tp, c.pp);
    int checked = 0;
    // Block sizes alternate within one model so each batch size's memo is rebuilt.
    for (const int block : {16, 0, 32, 16}) {
      for (const int64_t n : {1, 2, 3, 7, 31, 64, 65, 200, 256, 1023}) {
        for (const int64_t per_seq : {1, 2, 17, 500, 4097, 32768}) {
          BatchShape b;
          b.block_tokens = block;
          b.decode_seqs = n;
          b.decode_context_tokens = n * per_seq + (per_seq > 1 ? n / 2 : 0);
          const IterationCost a = fast.iteration(b, OpDetail::kTotals);
          const IterationCost e = full.iteration(b);
          INFO(c.model << " tp " << c.tp << " pp " << c.pp << " block " << block << " n " << n
                       << " context " << b.decode_context_tokens);
          CHECK(a.ops.empty());
          CHECK(!e.ops.empty());
          CHECK(same_bits(a.seconds, e.seconds));
          CHECK(same_bits(a.ops_seconds, e.ops_seconds));
          CHECK(same_bits(a.overhead_seconds, e.overhead_seconds));
          CHECK(same_bits(a.flops, e.flops));
          CHECK(same_bits(a.bytes, e.bytes));
          ++checked;
        }
      }
    }
    CHECK(checked == 4 * 10 * 6);
  }
}

TEST_CASE("decode-step and row memos: mixed batches' totals have the full costing's bits",
          "[engine][fast_forward][latency]") {
  const LatencyModel m = model_of("llama-3-8b", AttentionKind::kFlash, 1, 1);
  // A prefill chunk beside 5 decodes of context 100 each (500 in all), given as an aggregate and
  // as DecodeSeq entries: the totals (from the row-count memo, LatencyModel::mixed_totals) are the
  // full costing's, and only the kFull call lists ops.
  BatchShape mixed;
  mixed.block_tokens = 16;
  mixed.prefill = {{300, 0, true}};
  mixed.decode_seqs = 5;
  mixed.decode_context_tokens = 500;
  BatchShape listed = mixed;
  listed.decode_seqs = 0;
  listed.decode_context_tokens = 0;
  listed.decode.assign(5, DecodeSeq{100});
  for (const BatchShape& b : {mixed, listed}) {
    const IterationCost a = m.iteration(b, OpDetail::kTotals);
    const IterationCost e = m.iteration(b);
    CHECK(a.ops.empty());
    CHECK(same_bits(a.seconds, e.seconds));
    CHECK(same_bits(a.flops, e.flops));
    CHECK(same_bits(a.bytes, e.bytes));
  }
  // decode_step_seconds (the totals path) equals a listed decode-only batch's full cost.
  BatchShape five;
  five.block_tokens = 16;
  five.decode.assign(5, DecodeSeq{100});
  CHECK(same_bits(m.decode_step_seconds(5, 500, 16), m.iteration(five).seconds));
}
