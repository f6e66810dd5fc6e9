// The random scenarios of the engine's property tests (invariants_test.cc, and the request
// observer's identity in observer_identity_test.cc): small runs drawn from a seed over stores,
// guards, schedulers, preemption and OOM modes, and with `wide` the fast-forward's variety.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>

#include <fmt/format.h>

namespace kvsim::test {

// Where random_scenario(seed, true) may write its trace (removed by the test that runs it).
inline std::filesystem::path random_trace_path(uint64_t seed) {
  return std::filesystem::temp_directory_path() /
         fmt::format("kvsim-pc-{}-{}.jsonl", ::getpid(), seed);
}

// Writes to `path` a Mooncake-format trace of 40 requests whose prompts share prefix blocks:
// each request is one of `conversations` conversations, 1 to `max_shared` of its blocks and one
// or two of its own, `max_output` output tokens at most, arrivals up to `max_gap_ms` apart. The
// draws come from `g`, in a fixed order.
inline void write_shared_prefix_trace(std::mt19937_64& g, const std::string& path,
                                      uint64_t conversations, uint64_t max_shared,
                                      uint64_t max_output, uint64_t max_gap_ms) {
  std::ofstream trace(path);
  int64_t ms = 0;
  for (int i = 0; i < 40; ++i) {
    const uint64_t conversation = g() % conversations;
    const uint64_t shared = 1 + g() % max_shared, own = 1 + g() % 2;
    std::string ids;
    for (uint64_t b = 0; b < shared + own; ++b) {
      ids += fmt::format("{}{}", b ? ", " : "",
                         b < shared ? conversation * 100 + b : 1000 + i * 10 + b);
    }
    const uint64_t prompt = (shared + own - 1) * 512 + 1 + g() % 511;
    const uint64_t output = 1 + g() % max_output;
    trace
        << fmt::format(
               R"({{"timestamp": {}, "input_length": {}, "output_length": {}, "hash_ids": [{}]}})",
               ms, prompt, output, ids)
        << "\n";
    ms += static_cast<int64_t>(g() % max_gap_ms);
  }
}

// `wide`: the fast-forward identity test's variety on top (more paged stores, prefix caching
// over a trace with shared prefixes, vllm_v0 and the scheduling policies, bursts, longer
// outputs, max_num_seqs caps, a queue deadline, native attention, tensor or pipeline
// parallelism).
inline std::string random_scenario(uint64_t seed, bool wide = false) {
  std::mt19937_64 g(seed);
  auto pick = [&](std::initializer_list<const char*> xs) {
    return *(xs.begin() + static_cast<long>(g() % xs.size()));
  };
  const char* kv = pick({"{type: paged, block_size: 16}", "{type: paged, block_size: 32}",
                         "{type: contiguous, reserve: prompt_plus_max_new}",
                         "{type: contiguous, reserve: max_len, max_len: 16384}",
                         "{type: caching_allocator, growth: preallocate}",
                         "{type: caching_allocator, growth: chunked, chunk_tokens: 512}"});
  const char* guards =
      pick({"[]", "[{type: kv_guard, safety_margin_gb: 4}]",
            "[{type: kv_guard, safety_margin_gb: 4, on_fail: truncate, max_safe_len: 4096}]",
            "[{type: reserve, timeout_s: 5}]", "[{type: max_inflight, max_inflight: 4}]",
            "[{type: max_model_len, max_model_len: 12000, on_fail: truncate}, {type: reserve}]"});
  const double rate = 0.5 + static_cast<double>(g() % 200) / 10.0;
  const char* scheduler = pick({"continuous", "continuous", "static"});
  if (wide && g() % 4 == 0) scheduler = "vllm_v0";
  const char* chunked = pick({"true", "false"});
  // Unchunked, the batch must hold a whole request (max_model_len): 4,096 only with chunking,
  // which the static scheduler never does.
  const char* batched = pick({"16384", "4096"});
  const bool chunks = chunked == std::string("true") && scheduler == std::string("continuous");
  std::string extra_engine, extra_workload;
  int gpu_gb = 24;
  const char* outputs = "{type: uniform, min: 1, max: 300}";
  std::string trace_path;  // a trace instead of the generated workload
  std::string model = "llama-3-8b";
  if (wide) {
    // A quarter with sliding-window attention (Mistral-7B-v0.1's shape, a window that contexts
    // reach while decoding): drawn apart, so that the other choices stay as they were.
    std::mt19937_64 windowed(seed ^ 0x5eedULL);
    if (windowed() % 4 == 0) {
      model = fmt::format(
          "{{name: windowed, layers: 32, heads: 32, kv_heads: 8, head_dim: 128, hidden: 4096, "
          "ffn: 14336, vocab: 32000, max_position: 32768, sliding_window: {}}}",
          std::initializer_list<int>{200, 700, 3000}.begin()[windowed() % 3]);
    }
    if (g() % 2 == 0) kv = pick({"{type: paged, block_size: 16}", "{type: paged, block_size: 8}"});
    if (g() % 4 == 0) {
      // Prefix caching over a Mooncake-format trace whose prompts share prefix blocks (5
      // conversations, each request a few of its blocks and one or two of its own), so cached
      // blocks are hit, shared and evicted while decodes cross into new ones.
      kv = "{type: paged, block_size: 16, enable_prefix_caching: true}";
      const std::string path = random_trace_path(seed).string();
      write_shared_prefix_trace(g, path, 5, 6, 400, 1500);
      trace_path = path;
    }
    extra_engine = fmt::format("  scheduling_policy: {}\n  max_num_seqs: {}\n",
                               pick({"fcfs", "priority", "shortest_prompt_first"}),
                               pick({"256", "256", "8", "3"}));
    if (g() % 3 == 0) extra_engine += "  max_queue_time_s: 4\n";
    // Native attention (its activations grow with the context: its score matrices need a
    // larger GPU), tensor and pipeline parallelism (another latency line and pool per GPU).
    if (g() % 3 == 0) {
      extra_engine += "  attention: native\n";
      gpu_gb = 48;
    }
    extra_engine += pick({"", "", "  tensor_parallel: 2\n", "  pipeline_parallel: 2\n"});
    if (g() % 2 == 0) {
      extra_workload = fmt::format(
          "  bursts: [{{at_s: {}, count: {}, prompt_tokens: {{type: uniform, min: 16, max: 6000}}, "
          "output_tokens: 200}}]\n",
          g() % 4, 1 + g() % 12);
    }
    outputs = pick({"{type: uniform, min: 1, max: 300}", "{type: uniform, min: 100, max: 900}"});
  }
  const std::string workload =
      trace_path.empty()
          ? fmt::format(
                "  arrivals: {{type: poisson, rate: {}}}\n"
                "  max_requests: 40\n"
                "  prompt_tokens: {{type: mixture, components: [{{weight: 0.8, type: uniform, min: "
                "16, "
                "max: 2048}}, {{weight: 0.2, type: uniform, min: 4096, max: 14000}}]}}\n"
                "  output_tokens: {}\n{}",
                rate, outputs, extra_workload)
          : fmt::format("  trace: {{path: {}}}\n", trace_path);
  return fmt::format(R"(
name: random-{}
seed: {}
model: {}
gpu: {{name: g, memory_gb: {}, hbm_gb_per_s: 1000, fp16_tflops: 200}}
engine:
  scheduler: {}
  chunked_prefill: {}
  max_num_batched_tokens: {}
  max_model_len: 14300  # prompts up to 14,000 + 300 output tokens, past the model's 8,192
  allow_long_max_model_len: true
  preemption: {}
  on_oom: {}
  restart_s: 3
  kv: {}
{}workload:
{}policies: [{{name: p, guards: {}}}]
)",
                     seed, seed, model, gpu_gb, scheduler, chunked, chunks ? batched : "16384",
                     pick({"recompute", "swap", "off"}), pick({"crash", "abort_request"}), kv,
                     extra_engine, workload, guards);
}

// The 2026 models the engine serves with their own machinery, drawn from a seed: hybrid
// local/global attention (Gemma 3's seven KV cache groups, gpt-oss's two, which is also MoE), a
// dense MoE model (Qwen3-30B-A3B, full attention: the fast-forward runs it) and speculative
// decoding (EAGLE-3 and ngram over Llama-3-8B), each on a GPU sized to its weights plus a few
// GiB so that the pool is tight enough to preempt, with prefix caching over a trace of shared
// prefixes or a generated workload, async scheduling on or off, recompute or swap.
inline std::string random_modern_scenario(uint64_t seed) {
  std::mt19937_64 g(seed);
  auto pick = [&](std::initializer_list<const char*> xs) {
    return *(xs.begin() + static_cast<long>(g() % xs.size()));
  };
  struct Served {
    const char* model;
    double weights_gib;     // what kvsim loads (`kvsim check` on a GPU too small says it)
    double request_kv_gib;  // one max_model_len request's KV, as vLLM's start-up check sums it
    const char* speculative;
  };
  const Served served[] = {
      {"gemma-3-27b", 50.31, 5.0, ""},
      {"gpt-oss-20b", 12.82, 0.3, ""},
      {"qwen3-30b-a3b", 56.87, 0.92, ""},
      {"llama-3-8b", 14.96, 1.23,
       "  speculative_config: {method: eagle3, num_speculative_tokens: 3, "
       "acceptance_per_position: [0.75, 0.5, 0.3]}\n"},
      {"llama-3-8b", 14.96, 1.23,
       "  speculative_config: {method: ngram_gpu, num_speculative_tokens: 2, "
       "acceptance_rate: 0.5}\n"},
  };
  const Served& m = served[g() % std::size(served)];
  // A pool of 1.05 to 2.5 max_model_len requests, after 2 GiB for the profile run's peak and the
  // rest: tight enough that long prompts preempt one another.
  const double kv_gib = m.request_kv_gib * (1.05 + static_cast<double>(g() % 15) / 10.0);
  const double memory_gib = (m.weights_gib + 2.0 + kv_gib) / 0.9;
  std::string engine = m.speculative;
  engine += fmt::format("  async_scheduling: {}\n", pick({"true", "false"}));
  engine += fmt::format("  max_num_seqs: {}\n", pick({"256", "16", "4"}));
  std::string kv = fmt::format("{{type: paged, block_size: {}", pick({"16", "32"}));
  std::string workload;
  if (g() % 2 == 0) {
    // Prefix caching over shared prefixes, as random_scenario's wide trace draws them.
    kv += ", enable_prefix_caching: true";
    const std::string path = random_trace_path(seed).string();
    write_shared_prefix_trace(g, path, 4, 8, 600, 1200);
    workload = fmt::format("  trace: {{path: {}}}\n", path);
  } else {
    workload = fmt::format(
        "  arrivals: {{type: poisson, rate: {}}}\n  max_requests: 40\n"
        "  prompt_tokens: {{type: uniform, min: 16, max: 9000}}\n"
        "  output_tokens: {{type: uniform, min: 1, max: 600}}\n",
        1 + g() % 20);
  }
  kv += "}";
  return fmt::format(R"(
name: modern-{}
seed: {}
model: {}
gpu: {{name: g, memory_gib: {:.2f}, hbm_gb_per_s: 3000, fp16_tflops: 900}}
engine:
  scheduler: continuous
  chunked_prefill: true
  max_num_batched_tokens: {}
  max_model_len: 10000  # Llama-3-8B's 8,192 positions: past them on purpose
  allow_long_max_model_len: true
  preemption: {}
  on_oom: {}
  restart_s: 3
  kv: {}
{}workload:
{}policies: [{{name: p, guards: []}}]
)",
                     seed, seed, m.model, memory_gib, pick({"2048", "8192"}),
                     pick({"recompute", "swap"}), pick({"crash", "abort_request"}), kv, engine,
                     workload);
}

}  // namespace kvsim::test
