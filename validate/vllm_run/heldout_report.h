// The held-out report of `import llmservingsim`: MAPE and mean signed error per op class, over
// all rows and by token-count bin, as heldout.csv rows, a JSON block and a table for stdout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvsim::validate {

// One held-out prediction: which op class and token count, measured and predicted seconds.
struct Heldout {
  std::string op_class;  // "gemm", "elementwise", "attention_prefill", "fused_moe", ...
  std::string op;        // the source's op ("qkv_proj", "mixed", "sampler", "moe", ...)
  int64_t tokens = 0;    // batched tokens (sequences for per-sequence ops)
  double measured = 0, predicted = 0;
};

// "1-4", "5-64", "65-256", "257-1024", "1025-4096", ">4096".
std::string token_bin(int64_t tokens);

struct HeldoutReport {
  std::string csv;                  // heldout.csv
  nlohmann::ordered_json by_class;  // class -> {rows, mape, signed, bins: {bin: {rows, mape}}}
  std::string table;                // one line a class, MAPE by bin
  double mape = 0;                  // over every row
};
HeldoutReport heldout_report(const std::vector<Heldout>& held);

}  // namespace kvsim::validate
