// Attention under a sliding window reads at most the window's KV (decode) and only the keys
// inside some query's window (prefill chunks).
#include "latency_test_util.h"

using namespace kvsim;
using namespace kvsim::test;

TEST_CASE("decode attention of a sliding-window model reads the window's KV, not the context",
          "[latency][window]") {
  // Mistral-7B (window 4,096), one sequence decoding with 10,001 tokens of context. Per layer,
  // K and V of 4,096 tokens: 2 x 8 KV heads x 128 x 2 bytes = 4,096 bytes each, plus Q read and
  // O written: 2 x 32 heads x 128 x 2 = 16,384 bytes. 32 layers: 4,096 x 4,096 x 32 +
  // 16,384 x 32 = 536,870,912 + 524,288 = 537,395,200 bytes (4,096 x 131,072 bytes of KV).
  const LatencyModel m = make_model("mistral-7b");
  const IterationCost a_cost =
      m.iteration(decode_batch({10001}));  // find_op returns a reference into it
  const OpCost& a = find_op(a_cost, "attention_decode");
  CHECK(a.bytes == Approx(537395200.0).epsilon(1e-12));
  // The same as a sequence of exactly the window, and as the aggregate form with the attended
  // tokens the engine sums (ModelSpec::attended_tokens).
  CHECK(m.iteration(decode_batch({10001})).seconds ==
        Approx(m.iteration(decode_batch({4096})).seconds).epsilon(1e-15));
  const ModelSpec& spec = Catalog::builtin().model("mistral-7b");
  CHECK(spec.attended_tokens(10001) == 4096);
  CHECK(spec.attended_tokens(4096) == 4096);
  CHECK(spec.attended_tokens(100) == 100);
  // Below the window nothing changes: 100 tokens read 100 x 4,096 x 32 + 524,288.
  CHECK(find_op(m.iteration(decode_batch({100})), "attention_decode").bytes ==
        Approx(100.0 * 4096 * 32 + 524288).epsilon(1e-12));
}

TEST_CASE("a model without a window reads the whole context", "[latency][window]") {
  // Llama-3-8B has Mistral's attention shape (32 layers, 8 KV heads of 128) and no window:
  // 10,001 x 131,072 + 524,288 = 1,311,375,360 bytes.
  const LatencyModel m = make_model("llama-3-8b");
  CHECK_FALSE(Catalog::builtin().model("llama-3-8b").sliding_window.has_value());
  CHECK(Catalog::builtin().model("llama-3-8b").attended_tokens(10001) == 10001);
  CHECK(find_op(m.iteration(decode_batch({10001})), "attention_decode").bytes ==
        Approx(1311375360.0).epsilon(1e-12));
}

TEST_CASE("prefill attention of a chunk reads at most the window", "[latency][window]") {
  const LatencyModel m = make_model("mistral-7b");
  const double L = 32, H = 32, Hkv = 8, D = 128;
  SECTION("a chunk wholly past the window") {
    // 2,048 tokens after 8,192: each query sees 4,096 keys, 2,048 x 4,096 pairs; the chunk
    // reads keys from 8,192 - 4,096 + 1 = 4,097 to 10,239: 6,143 = 4,095 + 2,048.
    const IterationCost a_cost =
        m.iteration(prefill_batch(2048, 8192));  // find_op returns a reference into it
    const OpCost& a = find_op(a_cost, "attention_prefill");
    CHECK(a.flops == Approx(L * 4 * D * H * 2048.0 * 4096).epsilon(1e-12));
    CHECK(a.bytes ==
          Approx(L * (2 * 2048.0 * H * D * 2 + 2 * 6143.0 * Hkv * D * 2)).epsilon(1e-12));
  }
  SECTION("a chunk that crosses the window") {
    // 2,048 tokens after 3,000: queries 0 .. 1,095 see 3,001 .. 4,096 keys, the other 952 see
    // 4,096: 1,096 x 3,000 + 1,096 x 1,097 / 2 + 952 x 4,096 = 7,788,548 pairs (the sum of
    // min(3,001 + i, 4,096) over i < 2,048). Keys read: min(5,048, 4,095 + 2,048) = 5,048.
    const IterationCost a_cost =
        m.iteration(prefill_batch(2048, 3000));  // find_op returns a reference into it
    const OpCost& a = find_op(a_cost, "attention_prefill");
    CHECK(a.flops == Approx(L * 4 * D * H * 7788548.0).epsilon(1e-12));
    CHECK(a.bytes ==
          Approx(L * (2 * 2048.0 * H * D * 2 + 2 * 5048.0 * Hkv * D * 2)).epsilon(1e-12));
  }
  SECTION("a chunk inside the window is unchanged") {
    // 1,024 after 1,024: 1,024 x 1,024 + 1,024 x 1,025 / 2 pairs, as without a window.
    const IterationCost a_cost =
        m.iteration(prefill_batch(1024, 1024));  // find_op returns a reference into it
    const OpCost& a = find_op(a_cost, "attention_prefill");
    CHECK(a.flops == Approx(L * 4 * D * H * (1024.0 * 1024 + 1024.0 * 1025 / 2)).epsilon(1e-12));
  }
}
