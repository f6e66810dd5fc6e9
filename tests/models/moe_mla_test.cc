// Mixture-of-experts and multi-head latent attention models: parameter counts against the model
// cards, KV bytes per token (MLA's latent), and weights per GPU under tensor, data and expert
// parallelism (vLLM's sharding: docs/models.md "Mixture of experts", "MLA"). Every figure is
// derived by hand in the comments from the catalog shapes (models/catalog/models.yaml).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/hf_config.h"
#include "models/parallelism.h"

using namespace kvsim;

namespace {
const std::string kMoeHfConfigDir = std::string(KVSIM_TEST_DATA) + "/hf-configs/";
const ModelSpec& moe_model(const char* name) { return Catalog::builtin().model(name); }
int64_t moe_weights(const char* name, Parallelism par, int stage = 0) {
  return weights_bytes_on_gpu(moe_model(name), par, stage);
}
}  // namespace

TEST_CASE("DeepSeek-V3's parameters match the model card (671B + 14B MTP, 37B active)",
          "[models][moe][mla]") {
  // h 7168, H 128, q_lora 1536, kv_lora 512, qk 128 + 64 rotary, v 128, V 129,280.
  // MLA per layer: q_a 7168 x 1536 = 11,010,048 and its norm 1,536; q_b 1536 x 128 x 192 =
  // 37,748,736; kv_a 7168 x 576 = 4,128,768 and its norm 512; kv_b 512 x 128 x 256 = 16,777,216;
  // o 128 x 128 x 7168 = 117,440,512: 187,107,328.
  // Dense MLP (layers 0-2) 3 x 7168 x 18432 = 396,361,728. MoE layer (3-60): router 7168 x 256
  // = 1,835,008; 256 routed + 1 shared experts of 3 x 7168 x 2048 = 44,040,192 each:
  // 11,318,329,344; together 11,320,164,352.
  // Total = 2 x 129,280 x 7168 (embedding, LM head) = 1,853,358,080 + 61 x (187,107,328 +
  // 14,336 norms) + 3 x 396,361,728 + 58 x 11,320,164,352 + 7168
  //       = 1,853,358,080 + 11,414,421,504 + 1,189,085,184 + 656,569,532,416 + 7,168
  //       = 671,026,404,352 (the card: 671B).
  const ModelSpec& m = moe_model("deepseek-v3");
  CHECK(m.attention_kind() == "MLA");
  CHECK(m.moe_layers_in(0, 61) == 58);
  CHECK(m.param_count() == 671'026'404'352);
  CHECK(std::abs(static_cast<double>(m.param_count()) / 671e9 - 1) < 0.001);
  // Active: 8 routed + 1 shared expert per MoE layer: 58 x (1,835,008 + 9 x 44,040,192) in
  // place of the MoE layers' 58 x 11,320,164,352: 37,552,282,624 (the card: 37B).
  CHECK(m.active_param_count() == 37'552'282'624);
  // MTP module: one MoE decoder layer 187,107,328 + 14,336 + 11,320,164,352, enorm and hnorm
  // 14,336, eh_proj 2 x 7168 x 7168 = 102,760,448, the head's norm 7,168, its embedding and LM
  // head 1,853,358,080: 13,463,426,048 (the card: 14B); with the main model 684,489,830,400
  // (the card's 685B).
  CHECK(m.mtp_param_count() == 13'463'426'048);
  CHECK(m.param_count() + m.mtp_param_count() == 684'489'830'400);
}

TEST_CASE("MLA keeps (kv_lora_rank + rope) per token and layer, whole on every TP rank",
          "[models][mla]") {
  // DeepSeek-V3, BF16 KV: 61 layers x (512 + 64) x 2 bytes = 70,272 bytes per token, against
  // 2 x 61 x 128 x 192 x 2 = 5,996,544 read as 128-head MHA (85x).
  const ModelSpec& m = moe_model("deepseek-v3");
  CHECK(m.kv_bytes_per_token() == 70'272);
  // vLLM keeps one latent "head" that TP ranks do not split: 70,272 on each of 8 GPUs.
  CHECK(kv_bytes_per_token_on_gpu(m, Parallelism{8, 1}, 0) == 70'272);
  // PP 2: stages of 31 and 30 layers (get_pp_indices): 31 x 576 x 2 = 35,712.
  CHECK(kv_bytes_per_token_on_gpu(m, Parallelism{1, 2}, 0) == 35'712);
  CHECK(kv_bytes_per_token_on_gpu(m, Parallelism{1, 2}, 1) == 34'560);
  ModelSpec fp8 = m;
  fp8.kv_dtype = DType::kFp8;
  CHECK(fp8.kv_bytes_per_token() == 35'136);
  // The GPU's share keeps the latent: gpu_share at TP 8 holds 16 query heads, 1 latent.
  const ModelSpec share = gpu_share(m, Parallelism{8, 1}, 0);
  CHECK(share.heads == 16);
  CHECK(share.kv_bytes_per_token() == 70'272);
}

TEST_CASE("DeepSeek-V3 FP8 weights per GPU: TP 8 against DP 8 with expert parallelism",
          "[models][moe][mla][parallel]") {
  // First with FP8 per-tensor scales (weight_group 0): a linear layer is in x out bytes + one
  // 4-byte scale; norms, router, embedding and LM head 16-bit.
  ModelSpec per_tensor = moe_model("deepseek-v3");
  per_tensor.weight_group = 0;
  const auto pt = [&](Parallelism par) { return weights_bytes_on_gpu(per_tensor, par, 0); };
  // TP 8, per layer: norms 2 x 7168 x 2 = 28,672; MLA with 16 heads per GPU: q_a (replicated)
  // 11,010,048 + 4, its norm 3,072, q_b 1536 x 16 x 192 = 4,718,592 + 4, kv_a (replicated)
  // 4,128,768 + 4, its norm 1,024, kv_b 512 x 16 x 256 = 2,097,152 + 4, o 16 x 128 x 7168 =
  // 14,680,064 + 4: 36,638,740. Dense MLP (ffn 2304 per GPU): 3 x 7168 x 2304 + 12 =
  // 49,545,228. MoE layer: router 7168 x 256 x 2 = 3,670,016; shared expert (256 per GPU)
  // 3 x 7168 x 256 + 12 = 5,505,036; 256 routed experts of width 2048 / 8 = 256, each
  // 5,505,036: 1,409,289,216; together 1,418,464,268.
  // 61 x (28,672 + 36,638,740) + 3 x 49,545,228 + 58 x 1,418,464,268 = 2,236,712,132 +
  // 148,635,684 + 82,270,927,544 = 84,656,275,360; embedding and LM head 2 x 16,160 x 7168 x 2
  // = 463,339,520 (129,280 = 64 x 2020, / 8); final norm 14,336: 85,119,629,216 (79.27 GiB).
  CHECK(pt(Parallelism{8, 1}) == 85'119'629'216);
  // DP 8 + EP: attention, dense layers and shared expert whole on every GPU (t = 1), 32 whole
  // routed experts each. Per layer: norms 28,672; MLA: its 187,107,328 parameters at a byte,
  // less the two latent norms' 2,048 counted again at 2 bytes, plus five 4-byte scales:
  // 187,109,396. Dense MLP 3 x 7168 x 18432 + 12 = 396,361,740. MoE: router 3,670,016; shared
  // 44,040,204; 32 experts x 44,040,204 = 1,409,286,528; together 1,456,996,748.
  // 61 x 187,138,068 + 3 x 396,361,740 + 58 x 1,456,996,748 = 11,415,422,148 + 1,189,085,220
  // + 84,505,811,384; embedding and LM head 2 x 129,280 x 7168 x 2 = 3,706,716,160; final norm
  // 14,336: 100,817,049,248 (93.89 GiB).
  CHECK(pt(Parallelism{1, 1, 8, true}) == 100'817'049'248);
  // Without expert parallelism the 8 replicas' GPUs split every expert 8 ways instead
  // (flatten_tp_across_dp): routed 256 x (3 x 7168 x 256 + 12) = 1,409,289,216 in place of
  // 1,409,286,528: 2,688 bytes (the 4-byte scales) more per MoE layer.
  CHECK(pt(Parallelism{1, 1, 8, false}) == 100'817'049'248 + 58 * 2'688);
  // As the checkpoint ships it (weight_block_size [128, 128]): one FP32 scale per 128 x 128
  // block, ceil(out / 128) x ceil(in / 128) x 4 bytes. TP 8, per layer: q_a 12 x 56 x 4 = 2,688,
  // q_b 24 x 12 x 4 = 1,152, kv_a 5 x 56 x 4 = 1,120, kv_b 32 x 4 x 4 = 512, o 56 x 16 x 4 =
  // 3,584: 9,056 in place of 20, attention 36,647,776. Dense MLP (2304): 2 x 18 x 56 x 4 + 56 x
  // 18 x 4 = 12,096 in place of 12: 49,557,312. An expert slice or the shared expert (256):
  // 2 x 2 x 56 x 4 + 56 x 2 x 4 = 1,344 in place of 12: 5,506,368; MoE layer 3,670,016 + 257 x
  // 5,506,368 = 1,418,806,592. 61 x (28,672 + 36,647,776) + 3 x 49,557,312 + 58 x
  // 1,418,806,592 + 463,339,520 + 14,336 = 85,140,071,456 (79.29 GiB).
  CHECK(moe_weights("deepseek-v3", Parallelism{8, 1}) == 85'140'071'456);
  // DP 8 + EP: attention 187,109,396 + 45,772 of block scales (45,792 in place of 20) =
  // 187,155,168; dense MLP 396,458,496; a whole expert 44,050,944; MoE layer 3,670,016 + 33 x
  // 44,050,944 = 1,457,351,168. 61 x 187,183,840 + 3 x 396,458,496 + 58 x 1,457,351,168 +
  // 3,706,716,160 + 14,336 = 100,840,687,968 (93.92 GiB). With 128-wide blocks the 8-way slices
  // of every expert (256 wide) carry exactly the whole experts' scale count: no EP difference.
  CHECK(moe_weights("deepseek-v3", Parallelism{1, 1, 8, true}) == 100'840'687'968);
  CHECK(moe_weights("deepseek-v3", Parallelism{1, 1, 8, false}) == 100'840'687'968);
  CHECK(local_experts(moe_model("deepseek-v3"), Parallelism{1, 1, 8, true}) == 32);
  CHECK(local_experts(moe_model("deepseek-v3"), Parallelism{1, 1, 8, false}) == 256);
}

TEST_CASE("Qwen3-30B-A3B from its config.json: 30.5B, every layer 128 experts of 768",
          "[models][moe][hf]") {
  const ModelSpec m = read_hf_config(kMoeHfConfigDir + "qwen3-30b-a3b-instruct-2507.json");
  CHECK(m.num_experts == 128);
  CHECK(m.experts_per_token == 8);
  CHECK(m.routed_ffn() == 768);
  CHECK(m.moe_layers_in(0, m.layers) == 48);
  // Per layer: Q, O 2 x 2048 x 4096 = 16,777,216; K, V 2 x 2048 x 512 = 2,097,152; router
  // 2048 x 128 = 262,144; experts 128 x 3 x 2048 x 768 = 603,979,776; norms 4,096 plus the
  // per-head q/k norms 2 x 128 = 256: 623,120,640 x 48 = 29,909,790,720; embedding and LM head
  // 2 x 151,936 x 2048 = 622,329,856; final norm 2,048: 30,532,122,624 (the card: 30.5B).
  // Active: 8 experts, 37,748,736 per layer in place of 603,979,776:
  // 30,532,122,624 - 48 x 566,231,040 = 3,353,032,704 (the card: 3.3B).
  CHECK(m.param_count() == 30'532'122'624);
  CHECK(m.active_param_count() == 3'353'032'704);
  // KV: 48 x 2 x 4 x 128 x 2 = 98,304 bytes per token.
  CHECK(m.kv_bytes_per_token() == 98'304);
  const ModelSpec& c = moe_model("qwen3-30b-a3b");
  CHECK(c.param_count() == m.param_count());
  CHECK(c.weights_bytes() == m.weights_bytes());
  CHECK(c.kv_bytes_per_token() == m.kv_bytes_per_token());
}

TEST_CASE("Qwen3-30B-A3B BF16 weights per GPU at TP 2 and at DP 2 with EP",
          "[models][moe][parallel]") {
  // TP 2, per layer: Q, O 2 x 2048 x 2048 x 2 = 16,777,216; K, V (2 KV heads) 2 x 2048 x 256
  // x 2 = 2,097,152; norms 8,192 and the q/k norms (replicated) 2 x 128 x 2 = 512; router
  // 2048 x 128 x 2 = 524,288; experts 128 x 3 x 2048 x 384 x 2 = 603,979,776: 623,387,136 x 48
  // = 29,922,582,528; embedding and LM head 2 x 75,968 x 2048 x 2 = 622,329,856; final norm
  // 4,096: 30,544,916,480.
  CHECK(moe_weights("qwen3-30b-a3b", Parallelism{2, 1}) == 30'544'916'480);
  // DP 2 + EP: attention whole (t = 1): Q, O 33,554,432; K, V 4,194,304; norms 8,192 and q/k
  // norms 512; router 524,288; 64 whole experts 64 x 3 x 2048 x 768 x 2 = 603,979,776:
  // 642,261,504 x 48 = 30,828,552,192; embedding and LM head 2 x 151,936 x 2048 x 2 =
  // 1,244,659,712; final norm 4,096: 32,073,216,000.
  CHECK(moe_weights("qwen3-30b-a3b", Parallelism{1, 1, 2, true}) == 32'073'216'000);
  // KV per GPU: TP 2 holds 2 of the 4 KV heads (49,152); a DP rank all 4 (98,304).
  CHECK(kv_bytes_per_token_on_gpu(moe_model("qwen3-30b-a3b"), Parallelism{2, 1}, 0) == 49'152);
  CHECK(kv_bytes_per_token_on_gpu(moe_model("qwen3-30b-a3b"), Parallelism{1, 1, 2, true}, 0) ==
        98'304);
}

TEST_CASE("DeepSeek-V3 and Kimi-K2 config.json files read to their catalog entries",
          "[models][moe][mla][hf]") {
  const ModelSpec d = read_hf_config(kMoeHfConfigDir + "deepseek-v3.json");
  const ModelSpec& dc = moe_model("deepseek-v3");
  CHECK(d.kv_heads == 1);
  CHECK(d.head_dim == 192);
  CHECK(d.dense_layers == std::vector<int>{0, 1, 2});
  CHECK(d.mtp_layers == 1);
  CHECK(d.param_count() == dc.param_count());
  CHECK(d.kv_bytes_per_token() == dc.kv_bytes_per_token());
  // quantization_config: fp8 with weight_block_size [128, 128] (the catalog's weight_group).
  CHECK(d.weight_dtype == DType::kFp8);
  CHECK(d.weight_group == 128);
  CHECK(d.weights_bytes() == dc.weights_bytes());
  // Kimi-K2: 64 heads, 384 experts, layer 0 dense. MLA per layer 1536 x 64 x 192 = 18,874,368
  // + 512 x 64 x 256 = 8,388,608 + 64 x 128 x 7168 = 58,720,256 + 11,010,048 + 1,536 +
  // 4,128,768 + 512 = 101,124,096. MoE layer: 7168 x 384 = 2,752,512 + 385 x 44,040,192 =
  // 16,955,473,920: 16,958,226,432. Total = 2 x 163,840 x 7168 = 2,348,810,240 + 61 x
  // (101,124,096 + 14,336) + 396,361,728 + 60 x 16,958,226,432 + 7,168 = 1,026,408,209,408
  // (the card: 1T); active 32,861,477,888 (the card: 32B).
  const ModelSpec k = read_hf_config(kMoeHfConfigDir + "kimi-k2-instruct.json");
  CHECK(k.param_count() == 1'026'408'209'408);
  CHECK(k.active_param_count() == 32'861'477'888);
  CHECK(k.param_count() == moe_model("kimi-k2").param_count());
  CHECK(k.kv_bytes_per_token() == 70'272);
}

TEST_CASE("Expert parallelism is refused where it cannot split", "[models][moe][parallel]") {
  // 8 experts cannot fill 16 expert-parallel GPUs; a dense model has no experts to split.
  CHECK_THROWS_AS(check_parallelism(moe_model("mixtral-8x7b"), Parallelism{1, 1, 16, true}),
                  InputError);
  CHECK_THROWS_AS(check_parallelism(moe_model("llama-3-8b"), Parallelism{1, 1, 2, true}),
                  InputError);
  CHECK_NOTHROW(check_parallelism(moe_model("mixtral-8x7b"), Parallelism{2, 1, 4, true}));
}
