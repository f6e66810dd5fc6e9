// Per-GPU weights and KV under tensor/pipeline parallelism and quantization, each
// figure derived by hand below from the catalog shapes (models/catalog/models.yaml)
// and the vLLM sharding rules of docs/memory.md "Parallelism and quantization".
#include <catch2/catch.hpp>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/parallelism.h"

using namespace kvsim;

namespace {
const ModelSpec& model(const char* name) { return Catalog::builtin().model(name); }
int64_t weights(const char* name, int tp, int pp = 1, int stage = 0) {
  return weights_bytes_on_gpu(model(name), Parallelism{tp, pp}, stage);
}
int64_t kv(const char* name, int tp, int pp = 1, int stage = 0) {
  return kv_bytes_per_token_on_gpu(model(name), Parallelism{tp, pp}, stage);
}
}  // namespace

TEST_CASE("llama-2-7b (MHA) weights and KV per GPU at TP 1/2/4/8", "[models][parallel]") {
  // L 32, h 4096, H = H_kv 32, D 128, ffn 11008, vocab 32000 (a multiple of 64), FP16.
  // Per layer: norms 2 x 4096 x 2 = 16,384 (replicated); Q, K, V, O 4 x 4096 x 4096 x 2 / t
  // = 134,217,728 / t; MLP 3 x 4096 x 11008 x 2 / t = 270,532,608 / t.
  // Embedding and LM head 2 x 32000 x 4096 x 2 / t = 524,288,000 / t; final norm 8,192.
  // Total = 32 x 16,384 + 8,192 + (32 x 404,750,336 + 524,288,000) / t
  //       = 532,480 + 13,476,298,752 / t.
  CHECK(weights("llama-2-7b", 1) == 13'476'831'232);  // = param_count x 2
  CHECK(model("llama-2-7b").weights_bytes() == 13'476'831'232);
  CHECK(weights("llama-2-7b", 2) == 6'738'681'856);
  CHECK(weights("llama-2-7b", 4) == 3'369'607'168);
  CHECK(weights("llama-2-7b", 8) == 1'685'069'824);
  // KV: 2 x 32 layers x (32 / t) heads x 128 x 2 bytes = 524,288 / t.
  CHECK(kv("llama-2-7b", 1) == 524'288);
  CHECK(kv("llama-2-7b", 2) == 262'144);
  CHECK(kv("llama-2-7b", 4) == 131'072);
  CHECK(kv("llama-2-7b", 8) == 65'536);
}

TEST_CASE("llama-3-8b (GQA, 8 KV heads) per GPU at TP 1/2/4/8/16", "[models][parallel]") {
  // L 32, h 4096, H 32, H_kv 8, D 128, ffn 14336, vocab 128256 (= 64 x 2004), FP16.
  // t <= 8, per layer: norms 16,384; Q and O 2 x 4096 x 4096 x 2 / t = 67,108,864 / t;
  // K and V 2 x 4096 x (8 x 128) x 2 / t = 16,777,216 / t; MLP 3 x 4096 x 14336 x 2 / t
  // = 352,321,536 / t: 16,384 + 436,207,616 / t. Embedding + LM head 2 x 128256 x 4096 x 2 / t
  // = 2,101,346,304 / t; final norm 8,192.
  // Total = 532,480 + (13,958,643,712 + 2,101,346,304) / t = 532,480 + 16,059,990,016 / t.
  CHECK(weights("llama-3-8b", 1) == 16'060'522'496);  // 14.96 GiB
  CHECK(weights("llama-3-8b", 2) == 8'030'527'488);
  CHECK(weights("llama-3-8b", 4) == 4'015'529'984);
  CHECK(weights("llama-3-8b", 8) == 2'008'031'232);
  // t = 16 > 8 KV heads: each GPU holds 1 KV head (a replica, vLLM get_num_kv_heads).
  // Per layer: norms 16,384; Q, O 2 x 4096 x 256 x 2 = 4,194,304; K, V 2 x 4096 x 128 x 2
  // = 2,097,152; MLP 3 x 4096 x 896 x 2 = 22,020,096: 28,327,936 x 32 = 906,493,952.
  // Embedding + LM head 2 x 8016 x 4096 x 2 = 131,334,144; final norm 8,192.
  CHECK(weights("llama-3-8b", 16) == 1'037'836'288);
  CHECK(kv_heads_per_gpu(model("llama-3-8b"), 8) == 1);
  CHECK(kv_heads_per_gpu(model("llama-3-8b"), 16) == 1);
  // KV: 2 x 32 x H_kv per GPU x 128 x 2 = 16,384 x H_kv per GPU.
  CHECK(kv("llama-3-8b", 1) == 131'072);
  CHECK(kv("llama-3-8b", 2) == 65'536);
  CHECK(kv("llama-3-8b", 4) == 32'768);
  CHECK(kv("llama-3-8b", 8) == 16'384);
  CHECK(kv("llama-3-8b", 16) == 16'384);  // replicated: no smaller than at TP 8
}

TEST_CASE("mixtral-8x7b (MoE) per GPU at TP 2", "[models][parallel]") {
  // L 32, h 4096, H 32, H_kv 8, D 128, ffn 14336 per expert, 8 experts, vocab 32000, BF16.
  // Per layer: norms 16,384; Q, O 2 x 4096 x 2048 x 2 = 33,554,432; K, V 2 x 4096 x 512 x 2
  // = 8,388,608; router 4096 x 8 x 2 = 65,536 (replicated, vLLM ReplicatedLinear); experts
  // 8 x 3 x 4096 x 7168 x 2 = 1,409,286,144: 1,451,311,104 x 32 = 46,441,955,328.
  // Embedding + LM head 2 x 16000 x 4096 x 2 = 262,144,000; final norm 8,192.
  CHECK(weights("mixtral-8x7b", 2) == 46'704'107'520);
  // TP 1 holds one copy of the replicated norms and router: 2 x 46,704,107,520
  // - 32 x (16,384 + 65,536) - 8,192 = 93,405,585,408.
  CHECK(weights("mixtral-8x7b", 1) == 93'405'585'408);
  CHECK(kv("mixtral-8x7b", 2) == 2 * 32 * 4 * 128 * 2);  // 65,536
}

TEST_CASE("FP8 KV halves KV bytes per token exactly", "[models][parallel][quant]") {
  for (const char* name : {"llama-2-7b", "llama-3-8b", "mixtral-8x7b", "llama-3-70b"}) {
    ModelSpec m = model(name);
    const int64_t fp16 = m.kv_bytes_per_token();
    m.kv_dtype = DType::kFp8;
    CHECK(2 * m.kv_bytes_per_token() == fp16);
    for (int t : {2, 4, 8}) {
      CHECK(2 * kv_bytes_per_token_on_gpu(m, {t, 1}, 0) == kv(name, t));
    }
  }
}

TEST_CASE("INT4 weights with AWQ group scales, to the byte", "[models][parallel][quant]") {
  ModelSpec m = model("llama-3-8b");
  m.weight_dtype = DType::kInt4;
  // Per linear layer (in x out): in x out / 2 bytes of weights, and per group of 128 inputs
  // per column an FP16 scale (2 bytes) and a 4-bit zero packed 8 to an int32.
  //   Q, O (4096 x 4096): 8,388,608 + 32 x 4096 x 2 + 32 x 512 x 4 = 8,716,288
  //   K, V (4096 x 1024): 2,097,152 + 32 x 1024 x 2 + 32 x 128 x 4 = 2,179,072
  //   gate, up (4096 x 14336): 29,360,128 + 32 x 14336 x 2 + 32 x 1792 x 4 = 30,507,008
  //   down (14336 x 4096): 29,360,128 + 112 x 4096 x 2 + 112 x 512 x 4 = 30,507,008
  // Per layer with the FP16 norms (16,384): 113,328,128 x 32 = 3,626,500,096. Embedding, LM
  // head (2,101,346,304) and final norm (8,192) stay FP16: 5,727,854,592.
  CHECK(m.weights_bytes() == 5'727'854'592);
  // FP8: every linear matrix at 1 byte plus one FP32 scale (7 per layer):
  // (436,207,616 / 2 + 28) x 32 + 16,384 x 32 + 2,101,346,304 + 8,192.
  m.weight_dtype = DType::kFp8;
  CHECK(m.weights_bytes() == (int64_t{218'103'808} + 28 + 16'384) * 32 + 2'101'346'304 + 8'192);
  // INT8: 1 byte per weight plus an FP32 scale per output column:
  // (4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096) x 4 = 172,032 per layer.
  m.weight_dtype = DType::kInt8;
  CHECK(m.weights_bytes() ==
        (int64_t{218'103'808} + 172'032 + 16'384) * 32 + 2'101'346'304 + 8'192);
  // KV is untouched by the weight type.
  CHECK(m.kv_bytes_per_token() == 131'072);
}

TEST_CASE("PP splits layers as vLLM get_pp_indices, the remainder before the last stage",
          "[models][parallel]") {
  CHECK(stage_layers(32, 2) == std::vector<int>{16, 16});
  CHECK(stage_layers(32, 3) == std::vector<int>{11, 11, 10});  // 10 each, +1 to stages 1 and 0
  CHECK(stage_layers(80, 3) == std::vector<int>{27, 27, 26});
  CHECK(stage_layers(5, 4) == std::vector<int>{1, 1, 2, 1});
  // llama-3-8b at PP 2: 16 layers of 436,224,000 bytes each = 6,979,584,000 per stage; the
  // embedding (1,050,673,152) on stage 0, the LM head (same) and final norm (8,192) on stage 1.
  CHECK(weights("llama-3-8b", 1, 2, 0) == 8'030'257'152);
  CHECK(weights("llama-3-8b", 1, 2, 1) == 8'030'265'344);
  CHECK(weights("llama-3-8b", 1, 2, 0) + weights("llama-3-8b", 1, 2, 1) ==
        weights("llama-3-8b", 1));
  CHECK(kv("llama-3-8b", 1, 2, 0) == 65'536);  // 16 layers of 4,096
  // Uneven, PP 3: 11, 11, 10 layers x 4,096 bytes of KV per token per layer.
  CHECK(kv("llama-3-8b", 1, 3, 0) == 45'056);
  CHECK(kv("llama-3-8b", 1, 3, 2) == 40'960);
  // TP 2 x PP 2 stage 1: 16 x (16,384 + 218,103,808) + 525,336,576 + 8,192.
  CHECK(weights("llama-3-8b", 2, 2, 1) ==
        16 * (int64_t{16'384} + 218'103'808) + 525'336'576 + 8'192);
}

TEST_CASE("gpu_share is the model one GPU holds", "[models][parallel]") {
  const ModelSpec& m = model("llama-3-70b");
  const ModelSpec s = gpu_share(m, {4, 1}, 0);
  CHECK(s.heads == 16);
  CHECK(s.kv_heads == 2);
  CHECK(s.ffn == 7168);
  CHECK(s.layers == 80);
  // 70B at TP 4: per layer 16,384 + (2 x 8192 x 8192 + 2 x 8192 x 1024 + 3 x 8192 x 28672) x 2
  // / 4 = 427,851,776; x 80 = 34,228,142,080; embedding + LM head 2 x 32064 x 8192 x 2
  // = 1,050,673,152; final norm 16,384: 35,278,831,616 bytes (32.86 GiB, against 131.42 on 1).
  CHECK(s.weights_bytes() == 35'278'831'616);
  CHECK(s.kv_bytes_per_token() == 81'920);                          // 2 x 80 x 2 x 128 x 2
  CHECK(gpu_share(m, {}, 0).weights_bytes() == m.weights_bytes());  // one GPU: the model
}

TEST_CASE("models that cannot be split are refused with the reason", "[models][parallel]") {
  const ModelSpec& m = model("llama-3-8b");
  CHECK_THROWS_WITH(check_parallelism(m, {3, 1}),
                    Catch::Matchers::Contains("32 query heads do not split 3 ways"));
  CHECK_THROWS_WITH(check_parallelism(m, {1, 33}),
                    Catch::Matchers::Contains("32 layers cannot fill 33 pipeline stages"));
  ModelSpec odd = m;
  odd.kv_heads = 6;
  odd.heads = 48;
  CHECK_NOTHROW(check_parallelism(odd, {2, 1}));  // 3 KV heads each
  CHECK_THROWS_WITH(check_parallelism(odd, {4, 1}), Catch::Matchers::Contains("6 KV heads") &&
                                                        Catch::Matchers::Contains("replicas"));
  CHECK_NOTHROW(check_parallelism(m, {16, 2}));
}

TEST_CASE("llama-3.1-70b and mistral-large-2407 with FP8 weights and KV at TP 4",
          "[models][parallel][quant]") {
  // llama-3.1-70b is Llama-3-70B's shape (80 layers, hidden 8192, 64 / 8 heads of 128, ffn
  // 28672, vocab 128256) with 131,072 positions. FP8 weights at TP 4, per layer: the linear
  // matrices (2 x 8192 x 8192 + 2 x 8192 x 1024 + 3 x 8192 x 28672 = 855,638,016) / 4 at one
  // byte = 213,909,504, their 7 FP32 scales (28), the two BF16 norms (2 x 8192 x 2 = 32,768):
  // 213,942,300; x 80 = 17,115,384,000. The BF16 embedding and LM head, 2 x (128256 / 4) x
  // 8192 x 2 = 1,050,673,152, and the final norm, 16,384: 18,166,073,536 bytes.
  ModelSpec llama = model("llama-3.1-70b");
  CHECK(llama.max_position == 131'072);
  llama.weight_dtype = DType::kFp8;
  llama.kv_dtype = DType::kFp8;
  CHECK(weights_bytes_on_gpu(llama, {4, 1}, 0) == 18'166'073'536);
  // KV: 2 x 80 layers x (8 / 4) heads x 128 x 1 byte = 40,960 per token per GPU.
  CHECK(kv_bytes_per_token_on_gpu(llama, {4, 1}, 0) == 40'960);
  // mistral-large-2407: 88 layers, hidden 12288, 96 / 8 heads of 128, ffn 28672, vocab 32768.
  // Per layer at TP 4: (2 x 12288 x 12288 + 2 x 12288 x 1024 + 3 x 12288 x 28672 =
  // 1,384,120,320) / 4 = 346,030,080, + 28 + 2 x 12288 x 2 = 49,152: 346,079,260; x 88 =
  // 30,454,974,880. Embedding and LM head 2 x (32768 / 4) x 12288 x 2 = 402,653,184, final norm
  // 24,576: 30,857,652,640 bytes (28.74 GiB).
  ModelSpec mistral = model("mistral-large-2407");
  CHECK(mistral.param_count() == 122'610'069'504);  // 88 x 1,384,144,896 + 805,306,368 + 12,288
  mistral.weight_dtype = DType::kFp8;
  mistral.kv_dtype = DType::kFp8;
  CHECK(weights_bytes_on_gpu(mistral, {4, 1}, 0) == 30'857'652'640);
  // KV: 2 x 88 x (8 / 4) x 128 x 1 = 45,056 per token per GPU.
  CHECK(kv_bytes_per_token_on_gpu(mistral, {4, 1}, 0) == 45'056);
}
