// The CPU backend: times, with std::chrono::steady_clock, the code the replay's CPU forward pass
// (validate/replay/cpu_forward.cc) runs, so `kvsim-validate e2e --backend cpu` calibrates the
// kernels its measured iterations execute:
//   flash         -> kv_head_attention (validate/paged_attention.h, Eigen tiles) per batch and KV
//                    head over the case's contiguous K/V; causal bottom-right, or every key
//   paged_decode  -> the forward's decode path: gather_kv_head through the case's block table,
//                    then kv_head_attention, per sequence and KV head
//   native, gemm  -> kernels/cpu_ref's float implementations (native's materialised scores; the
//                    forward never runs native attention)
// The attention results are rounded to the case's precision after the run (FP32: unchanged) for
// the correctness check; timing covers only the kernel. There is no cache flush between samples;
// CPU figures say nothing about a GPU.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <span>
#include <thread>

#include "kernels/cpu_ref/attention_ref.h"
#include "kernels/cpu_ref/gemm_ref.h"
#include "kernels/cpu_ref/membw_ref.h"
#include "kernels/cpu_ref/precision.h"
#include "validate/backend.h"
#include "validate/paged_attention.h"

namespace kvsim::validate {

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

// Flash: Q, O [batch, heads, seq_q, head_dim]; K, V [batch, kv_heads, seq_kv, head_dim] (shapes.h).
// Query head g of KV head kvh's group is head kvh * group + g, seq_q rows of head_dim apart.
void forward_flash(const kernels::AttentionShape& a, const CaseInputs& in, std::vector<float>& out,
                   AttentionScratch& s) {
  const int64_t D = a.head_dim;
  const int64_t group = a.group();
  const HeadRows rows{D, a.seq_q * D};
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t kvh = 0; kvh < a.kv_heads; ++kvh) {
      const int64_t kv_at = (b * a.kv_heads + kvh) * a.seq_kv * D;
      const int64_t q_at = (b * a.heads + kvh * group) * a.seq_q * D;
      kv_head_attention(&in.b[static_cast<size_t>(kv_at)], &in.c[static_cast<size_t>(kv_at)],
                        a.seq_kv - a.seq_q, a.seq_q, group, D, a.causal,
                        &in.a[static_cast<size_t>(q_at)], rows, &out[static_cast<size_t>(q_at)],
                        rows, s);
    }
  }
}

// Paged decode: Q, O [batch, heads, head_dim]; caches [num_blocks, kv_heads, block_size,
// head_dim]; table [batch, blocks_per_seq]. One query token per sequence over `context` keys.
void forward_paged_decode(const kernels::PagedDecodeShape& p, const CaseInputs& in,
                          std::vector<float>& out, AttentionScratch& s) {
  const int64_t D = p.head_dim;
  const int64_t group = p.group();
  const HeadRows rows{p.heads * D, D};
  for (int64_t b = 0; b < p.batch; ++b) {
    const std::span<const int32_t> table(&in.table[static_cast<size_t>(b * p.blocks_per_seq())],
                                         static_cast<size_t>(p.blocks_per_seq()));
    for (int kvh = 0; kvh < static_cast<int>(p.kv_heads); ++kvh) {
      gather_kv_head(in.b.data(), in.c.data(), static_cast<int>(p.kv_heads), p.block_size, D, table,
                     p.context, kvh, s);
      const int64_t q_at = (b * p.heads + kvh * group) * D;
      kv_head_attention(s.k.data(), s.v.data(), p.context - 1, 1, group, D, /*causal=*/true,
                        &in.a[static_cast<size_t>(q_at)], rows, &out[static_cast<size_t>(q_at)],
                        rows, s);
    }
  }
}

// Runs the case's CPU kernel once on `in`, writing into `out` (sized by the caller).
void run_kernel(const KernelCase& c, const CaseInputs& in, std::vector<float>& out,
                std::vector<uint64_t>& words_out, uint64_t& sink, AttentionScratch& scratch) {
  switch (c.kind) {
    case KernelClass::kNative:
      kernels::native_attention_cpu(c.attn, c.precision, in.a, in.b, in.c, out);
      break;
    case KernelClass::kFlash: forward_flash(c.attn, in, out, scratch); break;
    case KernelClass::kPagedDecode: forward_paged_decode(c.paged, in, out, scratch); break;
    case KernelClass::kGemm: kernels::gemm_cpu(c.gemm, c.precision, in.a, in.b, out); break;
    case KernelClass::kMembwCopy: kernels::membw_copy_cpu(in.words, words_out); break;
    case KernelClass::kMembwRead: sink += kernels::membw_read_cpu(in.words); break;
  }
}

size_t output_size(const KernelCase& c, const CaseInputs& in) {
  switch (c.kind) {
    case KernelClass::kGemm: return static_cast<size_t>(c.gemm.m * c.gemm.n);
    case KernelClass::kMembwCopy:
    case KernelClass::kMembwRead: return 0;
    default: return in.a.size();
  }
}

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::string device_name() const override { return "CPU " + cpu_model_name(); }

  nlohmann::ordered_json device_json() const override {
    nlohmann::ordered_json j;
    j["backend"] = "cpu";
    j["name"] = device_name();
    j["threads_used"] = 1;
    j["hardware_threads"] = std::thread::hardware_concurrency();
    j["note"] =
        "CPU run: single-threaded; flash and paged_decode run the CPU forward pass's "
        "Eigen attention, the rest float implementations of the kernels' algorithms; "
        "these figures are not GPU figures";
    return j;
  }

  std::vector<float> run_for_check(const KernelCase& c, const CaseInputs& in) override {
    std::vector<float> out(output_size(c, in));
    std::vector<uint64_t> words(in.words.size());
    uint64_t sink = 0;
    AttentionScratch scratch;
    run_kernel(c, in, out, words, sink, scratch);
    if (c.kind == KernelClass::kFlash || c.kind == KernelClass::kPagedDecode) {
      kernels::round_all(c.precision, out);  // the forward's code is float32 throughout
    }
    if (c.kind == KernelClass::kMembwCopy) return {words == in.words ? 1.0f : 0.0f};
    if (c.kind == KernelClass::kMembwRead)
      return {sink == kernels::membw_read_cpu(in.words) ? 1.0f : 0.0f};
    return out;
  }

  std::vector<double> time(const KernelCase& c, const TimingOptions& t, uint64_t seed) override {
    const CaseInputs in = make_case_inputs(c, seed);
    std::vector<float> out(output_size(c, in));
    std::vector<uint64_t> words(in.words.size());
    uint64_t sink = 0;
    AttentionScratch scratch;  // grown by the warmup, reused as the forward reuses its own
    for (int i = 0; i < t.warmup; ++i) run_kernel(c, in, out, words, sink, scratch);
    std::vector<double> seconds;
    for (int i = 0; i < t.repetitions; ++i) {
      const auto start = std::chrono::steady_clock::now();
      run_kernel(c, in, out, words, sink, scratch);
      const auto stop = std::chrono::steady_clock::now();
      seconds.push_back(std::chrono::duration<double>(stop - start).count());
    }
    // Keep the read probe's sum observable so the loop is not optimised away.
    if (sink == 0x5eed) fmt::print(stderr, " ");
    return seconds;
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace kvsim::validate
