// The latency model: how long one engine iteration (one forward pass over a batch that mixes
// prefill chunks and decode tokens) takes on one GPU, as a pure function of the model spec, the
// GPU spec, a profile and the batch. Each operation is a roofline:
//   seconds = max(FLOPs / (peak FLOP/s x compute eff), bytes / (peak bytes/s x memory eff))
//             + kernels x launch overhead
// summed over operations (kernels of a forward pass run one after another), plus a fixed
// per-iteration overhead. The lower bound uses the same operation counts at efficiency 1.0 with
// no overheads. See docs/latency.md for the operation list, the assumptions and the limits.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/attention_kind.h"
#include "models/gpu_spec.h"
#include "models/latency/collective_path.h"
#include "models/latency/collectives.h"
#include "models/latency/decode_step_fixed.h"
#include "models/latency/profile.h"
#include "models/model_spec.h"
#include "models/parallelism.h"

namespace kvsim {

struct LatencyShape;  // latency_shape.h: the per-GPU dimensions every costing uses

// A prefill chunk: `tokens` new prompt tokens of one sequence whose first `context_tokens`
// tokens are already in the KV cache (0 for a whole prompt, >0 for the later chunks of a
// chunked prefill or after a prefix-cache hit).
struct PrefillChunk {
  int64_t tokens = 0;
  int64_t context_tokens = 0;
  // The chunk ends the prompt, so this iteration computes logits and samples a token for it.
  bool emits_token = true;
};

// A decode sequence: one new token attending to `context_tokens` tokens of KV, the new one
// included (a sequence whose prompt had P tokens and that has produced g tokens decodes its next
// token with context P + g). With a sliding window it reads only the last window tokens
// (ModelSpec::attended_tokens).
struct DecodeSeq {
  int64_t context_tokens = 0;
};

// What one engine iteration processes.
struct BatchShape {
  std::vector<PrefillChunk> prefill;
  std::vector<DecodeSeq> decode;
  int block_tokens = 0;  // paged KV block size in tokens; 0 = contiguous KV
  // More decode sequences given by their count and context sum only, beside `decode`: the cost
  // depends on decode contexts only through their sum (an exact integer sum either way), so the
  // engine passes its full batch this way instead of one DecodeSeq per sequence. The sum is of
  // the KV tokens read, each sequence's ModelSpec::attended_tokens (its window with one).
  // Requires: decode_context_tokens >= decode_seqs >= 0.
  int64_t decode_seqs = 0;
  int64_t decode_context_tokens = 0;
  // Data parallelism with MoE layers: the tokens every rank's batch sends to the experts this
  // step, when a lockstep group knows them (sim/cluster/lockstep_group.h); 0: this batch's
  // tokens times data_parallel, the other ranks taken to carry the same load.
  int64_t moe_group_tokens = 0;
};

enum class Bound { kCompute, kMemory };
std::string_view bound_name(Bound b);  // "compute", "memory"

// One operation of the iteration, summed over layers (and over chunks for prefill attention).
// FLOPs and bytes are per GPU (with tensor parallelism: this GPU's shard).
struct OpCost {
  std::string_view name;  // "qkv_proj", "attention_prefill", ... (static strings)
  OpClass op_class = OpClass::kGemm;
  double flops = 0;
  double bytes = 0;
  double compute_s = 0;   // FLOPs at the class's (effective) compute rate
  double memory_s = 0;    // bytes at the class's (effective) memory rate
  double overhead_s = 0;  // kernel launches
  // max(compute_s, memory_s) + overhead_s, taken per layer and chunk and summed. Exception:
  // attention_decode uses max(compute, memory) of the per-context-token work plus the fixed
  // per-sequence memory (keeps it affine in the total context; see decode_step_affine).
  double seconds = 0;
  Bound bound = Bound::kMemory;  // which of compute_s/memory_s dominated
  CommDetail comm;               // collectives: path, graph or eager, where the time came from
};

struct IterationCost {
  double seconds = 0;           // ops_seconds + overhead_seconds: the iteration's wall time
  double ops_seconds = 0;       // sum of ops[i].seconds: GPU time of the forward pass
  double overhead_seconds = 0;  // the profile's per-iteration overhead (0 for empty batches)
  double flops = 0;             // sums over ops
  double bytes = 0;
  std::vector<OpCost> ops;  // in execution order; operations with no work are left out
};

// seconds = a + b * total_context_tokens, for a fixed number of decode sequences.
struct AffineCost {
  double a = 0;
  double b = 0;
  double at(double total_context_tokens) const { return a + b * total_context_tokens; }
};

// One cached GEMM cost (LatencyModel's memo; per unit of repetition; seconds < 0: empty).
struct GemmMemo {
  double compute_s = 0, memory_s = 0, seconds = -1;
};

// A decode-only batch of one size costed apart from its decode attention (LatencyModel's
// decode-step memo): the partial sums of the operations before decode attention, the operations
// after it, and decode attention's own terms, so that a step of any context costs one formula
// and a dozen additions, in the order the full costing adds them (the same bits).
struct DecodeStepMemo {
  int block_tokens = -1;  // the block size it was built for; -1: not built yet
  double pre_seconds = 0, pre_flops = 0, pre_bytes = 0;
  int post_count = 0;
  std::array<double, 12> post_seconds{}, post_flops{}, post_bytes{};
  // Decode attention's terms (costing.h, DecodeTerms), in its field order, and the
  // layer count it is summed over.
  std::array<double, 10> attention{};
  double layers = 0;
  // decode_step_fixed() of this size and block size, once computed.
  bool has_fixed = false;
  DecodeStepFixed fixed;
};

// How much of an iteration's cost to report: everything, or the totals only (seconds, flops,
// bytes; `ops` left empty), which the engine needs and which cost less to compute.
enum class OpDetail { kFull, kTotals };

class LatencyModel {
 public:
  // Requires: tensor_parallel, pipeline_parallel >= 1. Throws InputError when the model cannot
  // be split that way (check_parallelism) or a spec figure is unusable (zero peak). `model` is
  // the whole model; each GPU runs its 1/tensor_parallel shard of every layer of its stage.
  // Pipeline stages run one batch in sequence (docs/latency.md "Pipeline parallelism").
  LatencyModel(ModelSpec model, GpuSpec gpu, Profile profile, AttentionKind attention,
               int tensor_parallel = 1, int pipeline_parallel = 1);
  // The same with data and expert parallelism (Parallelism): the batch is one data-parallel
  // replica's, and the other replicas are taken to carry the same load, so an MoE layer sees d
  // times its tokens (docs/latency.md "Mixture of experts").
  LatencyModel(ModelSpec model, GpuSpec gpu, Profile profile, AttentionKind attention,
               Parallelism parallelism);

  // Cost of one iteration with the profile's efficiencies and overheads. With kTotals, `ops` is
  // left empty; every other figure has the same bits as with kFull.
  IterationCost iteration(const BatchShape& batch, OpDetail detail = OpDetail::kFull) const;
  // The same operations at efficiency 1.0, no launch/iteration overheads, no latency floors:
  // no implementation of these operations can run faster on this GPU (kernels in sequence).
  IterationCost lower_bound(const BatchShape& batch) const;

  // Wall time of a decode-only iteration of `num_seqs` sequences whose context lengths sum to
  // `total_context_tokens`. Equals iteration(b).seconds for every decode-only batch b with those
  // totals (the cost depends on the contexts only through their sum), and is affine in
  // total_context_tokens for fixed num_seqs and block size: see decode_step_affine(). The engine
  // uses this to advance k decode steps in closed form: each step adds num_seqs tokens, so
  //   sum_{i=0}^{k-1} (a + b (T + i n)) = k a + b (k T + n k (k-1) / 2).
  // With a sliding window the contexts are attended tokens (ModelSpec::attended_tokens), which
  // stop growing at the window: the closed form holds while every sequence is inside it.
  // Requires: num_seqs >= 0, total_context_tokens >= num_seqs (each context counts its new token).
  double decode_step_seconds(int64_t num_seqs, int64_t total_context_tokens,
                             int block_tokens = 0) const;
  AffineCost decode_step_affine(int64_t num_seqs, int block_tokens = 0) const;
  // decode_step_affine in DecodeStepFixed's integer form (kept in the decode-step memo). Its
  // duration_ns(T) is llround(decode_step_seconds(n, T) * 1e9) unless that value is within
  // ~1e-6 ns of a tie (tests/latency/decode_step_fixed_test.cc).
  DecodeStepFixed decode_step_fixed(int64_t num_seqs, int block_tokens = 0) const;
  double decode_step_lower_bound_seconds(int64_t num_seqs, int64_t total_context_tokens,
                                         int block_tokens = 0) const;

  // How collectives run (peer-to-peer, custom all-reduce, CUDA graphs: collectives.h); the
  // default is vLLM's defaults with the catalog's P2P. Requires: called before any costing.
  void set_collective_settings(const CollectiveSettings& settings);
  const CollectiveSettings& collective_settings() const { return comm_settings_; }
  // The measured collectives (nullptr on one GPU: none run).
  const Collectives* collectives() const { return comm_.get(); }

  const ModelSpec& model() const { return model_; }
  const GpuSpec& gpu() const { return gpu_; }
  const Profile& profile() const { return profile_; }
  AttentionKind attention() const { return attention_; }
  int tensor_parallel() const { return tp_; }
  int pipeline_parallel() const { return pp_; }
  Parallelism parallelism() const { return par_; }

 private:
  IterationCost cost(const BatchShape& batch, const Profile& p, bool ideal, bool keep_ops) const;
  // The collectives a batch runs with: comm_, or comm_eager_ for a V0 batch with a prefill;
  // none for the lower bound.
  const Collectives* collectives_for(const BatchShape& batch, bool ideal) const;
  // iteration(kTotals) of a decode-only aggregate batch of n sequences and context t, from
  // decode_memo_ (built on first use); false when n is past the memo's range.
  bool decode_step_totals(int64_t n, int64_t t, int block_tokens, IterationCost& out) const;
  // decode_memo_'s entry for n sequences and this block size (built on first use); nullptr when
  // n is past the memo's range.
  const DecodeStepMemo* decode_step_memo(int64_t n, int block_tokens) const;
  // iteration(kTotals) of any batch from row_memo_ and head_memo_ (built on first use), with
  // only attention costed afresh; false when its row count is past the memos' range.
  bool mixed_totals(const BatchShape& batch, IterationCost& out) const;
  // row_memo_'s row of `rows` rows (built on first use); nullptr past the memo's range.
  const double* row_ops(int64_t rows) const;
  // head_memo_'s entry for `emit` rows through the LM head (built on first use).
  const std::array<double, 3>& head_op(int64_t emit) const;

  // The tiled cost of each of the model's GEMMs (qkv, o, gate_up, down, router, lm_head) by row
  // count, for the row counts already seen: the engine asks for the same batch sizes over and
  // over, and the tile search is the costliest part of an iteration. A cache of a pure
  // function: results are identical with or without it. Not shared between threads (each
  // simulation builds its own LatencyModel). Indexed by row count, then GEMM: an iteration's
  // GEMMs mostly share its row count, so their entries share cache lines (one vector per GEMM
  // took a cache miss per GEMM on a mixed batch: most of the memo's cost).
  mutable std::vector<std::array<GemmMemo, 6>> gemm_memo_;
  // Decode-only iterations by batch size (DecodeStepMemo): a cache of a pure function, like
  // gemm_memo_ (tests/fast_forward/fast_forward_test.cc checks its bits against the full costing).
  mutable std::vector<DecodeStepMemo> decode_memo_;
  // Any iteration's operations but attention and the LM head, by row count: they depend on the
  // row count alone. A row holds the partial sums (seconds, flops, bytes) of the operations
  // before attention, then each operation after it as (seconds, flops, bytes), as the full
  // costing adds them (mixed_totals adds them one by one in its order: the same bits). Rows are
  // 3 + 3 x row_post_ops_ doubles (120 B for a dense model on one GPU: 1 MB for 8k rows), a
  // row's first -1 until built, grown to the largest row count seen (16k at most). A cache of a
  // pure function, like gemm_memo_ (tests/latency/mixed_memo_test.cc checks its bits against
  // the full costing).
  mutable std::vector<double> row_memo_;
  mutable int row_post_ops_ = -1;  // operations after attention, LM head aside; -1: none built
  mutable int row_head_at_ = 0;    // how many of them run before the LM head
  // The LM head's (seconds, flops, bytes) by its row count (the tokens sampled); seconds -1
  // until built.
  mutable std::vector<std::array<double, 3>> head_memo_;

  ModelSpec model_;
  GpuSpec gpu_;
  Profile profile_;
  Profile ideal_;
  AttentionKind attention_;
  int tp_;
  int pp_;
  Parallelism par_;
  // The per-GPU dimensions of model_ on gpu_ split tp_ x pp_, computed once (immutable: copies
  // share it).
  std::shared_ptr<const LatencyShape> shape_;
  CollectiveSettings comm_settings_;
  std::shared_ptr<const Collectives> comm_;
  // With graph_decode_only (V0): the same collectives all eager, for batches with a prefill.
  std::shared_ptr<const Collectives> comm_eager_;
};

// The figures `kvsim latency` prints for `batch` identical requests of `seq_len` prompt tokens
// on an idle server.
struct SequenceLatency {
  int64_t seq_len = 0;
  int64_t batch = 1;
  double prefill_s = 0;  // forward pass over the prompts (ops, no engine overhead)
  double prefill_lower_bound_s = 0;
  double ttft_s = 0;  // prefill iteration's wall time (with engine overhead)
  double ttft_lower_bound_s = 0;
  double decode_step_s = 0;  // one decode iteration with context seq_len + 1
  double decode_step_lower_bound_s = 0;
  double decode_tokens_per_s = 0;              // batch / decode_step_s
  double decode_tokens_per_s_upper_bound = 0;  // batch / decode_step_lower_bound_s
  IterationCost prefill;                       // the breakdowns
  IterationCost prefill_bound;
  IterationCost decode;
  IterationCost decode_bound;
};
SequenceLatency sequence_latency(const LatencyModel& m, int64_t seq_len, int64_t batch = 1,
                                 int block_tokens = 0);

}  // namespace kvsim
