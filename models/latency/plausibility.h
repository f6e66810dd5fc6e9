// The plausibility check behind `kvsim plausibility`: reads published latency claims from a CSV
// file and compares each with the physical lower bound of the same work on the same GPU and with
// kvsim's estimate. CSV format (docs/latency.md):
//   label,model,gpu,attention,kv_heads,block_size,seq_len,batch,metric,value
// '#' lines and blank lines are skipped; fields may be double-quoted; kv_heads may be empty (the
// model's own); metric is one of prefill_ms, prefill_s, ttft_ms, ttft_s, decode_tokens_per_s,
// decode_ms_per_token.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "models/latency/latency_model.h"

namespace kvsim {

class Catalog;

enum class ClaimKind { kPrefill, kTtft, kDecode };

struct Claim {
  std::string file;  // where it was read, for messages
  int line = 0;
  std::string label;
  std::string model;
  std::string gpu;
  AttentionKind attention = AttentionKind::kFlash;
  int kv_heads = 0;  // 0 = the model's own
  int block_tokens = 0;
  int64_t seq_len = 0;
  int64_t batch = 1;
  std::string metric;  // as written
  double value = 0;    // as written, in the metric's unit
  ClaimKind kind = ClaimKind::kPrefill;
  bool throughput = false;  // tokens/s (higher is faster) rather than a time
  double claimed = 0;       // seconds for times, tokens/s for throughputs
};

// Reads and validates every row. Throws InputError "<file>:<line>: <what>" on a malformed row,
// an unknown metric, model or GPU, or a file without the header row.
std::vector<Claim> read_claims(const std::filesystem::path& path, const Catalog& catalog);
std::vector<Claim> parse_claims(std::string_view text, const std::string& file,
                                const Catalog& catalog);

enum class Verdict { kPlausible, kOptimistic, kImpossible };
std::string_view verdict_name(Verdict v);  // "plausible", "optimistic", "impossible"

// A claim faster than the estimate by more than this factor is `optimistic`.
inline constexpr double kOptimisticFactor = 2.0;

struct ClaimCheck {
  Claim claim;
  double lower_bound = 0;  // fastest physically possible: seconds, or the highest tokens/s
  double estimate = 0;     // kvsim's estimate, same unit
  // Share of the hardware limit the claim needs: lower_bound / claimed for times,
  // claimed / lower_bound for throughputs. Above 1: impossible.
  double bound_fraction = 0;
  Verdict verdict = Verdict::kPlausible;
  // The arithmetic behind the bound, for the iteration the claim describes (prefill or one
  // decode step of the whole batch): total FLOPs and bytes, and what each alone needs at peak
  // (a bound even if every kernel overlapped perfectly).
  double flops = 0;
  double bytes = 0;
  double compute_floor_s = 0;      // flops / peak FLOP/s
  double memory_floor_s = 0;       // bytes / peak bytes/s
  double implied_flops_per_s = 0;  // flops / claimed time of that iteration
  double peak_flops = 0;
  double peak_bytes_per_s = 0;
};

// impossible: faster than the lower bound; optimistic: faster than the estimate by more than
// kOptimisticFactor; plausible otherwise. Times in seconds (lower is faster), throughputs in
// tokens/s (higher is faster).
Verdict judge(double claimed, double lower_bound, double estimate, bool throughput);

// Requires: the claim's model and GPU exist in `catalog` (read_claims checks this).
ClaimCheck check_claim(const Claim& c, const Catalog& catalog);

}  // namespace kvsim
