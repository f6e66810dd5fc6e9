// The hybrid-attention and 2026 MoE architectures read from config.json (gpt-oss, Gemma 3, Llama 4,
// Phi-3.5-MoE, Qwen2's max_window_layers) and their catalog entries: layer patterns, parameter
// counts against the model cards and weights per GPU, each derived by hand in the comments
// (docs/models.md "Hybrid attention").
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/hf_config.h"
#include "models/parallelism.h"

using namespace kvsim;

namespace {

const ModelSpec& hybrid_model(const char* name) { return Catalog::builtin().model(name); }

// gpt-oss-120b's config.json as published (openai/gpt-oss-120b), less the keys kvsim does not
// read (rope_scaling, swiglu_limit, token ids); layer_types alternates from sliding.
std::string gpt_oss_config(int layers, int experts) {
  std::string types;
  for (int i = 0; i < layers; ++i) {
    types += std::string(i == 0 ? "" : ", ") +
             (i % 2 == 0 ? "\"sliding_attention\"" : "\"full_attention\"");
  }
  return "{\"architectures\": [\"GptOssForCausalLM\"], \"hidden_size\": 2880, "
         "\"intermediate_size\": 2880, \"num_hidden_layers\": " +
         std::to_string(layers) + ", \"num_local_experts\": " + std::to_string(experts) +
         ", \"num_experts_per_tok\": 4, \"num_attention_heads\": 64, \"num_key_value_heads\": 8, "
         "\"head_dim\": 64, \"sliding_window\": 128, \"layer_types\": [" +
         types +
         "], "
         "\"max_position_embeddings\": 131072, \"attention_bias\": true, \"vocab_size\": 201088, "
         "\"tie_word_embeddings\": false, \"quantization_config\": {\"quant_method\": \"mxfp4\"}, "
         "\"torch_dtype\": \"bfloat16\"}";
}

// google/gemma-3-27b-it's config.json: the language model in text_config, which leaves out
// vocab_size and max_position_embeddings (Gemma3TextConfig's defaults: 262208, 131072).
const char* const kGemma3Config = R"({
  "architectures": ["Gemma3ForConditionalGeneration"],
  "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
                  "model_type": "gemma3_text", "num_attention_heads": 32, "num_hidden_layers": 62,
                  "num_key_value_heads": 16, "query_pre_attn_scalar": 168,
                  "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
  "torch_dtype": "bfloat16",
  "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                    "model_type": "siglip_vision_model", "num_attention_heads": 16,
                    "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": false}
})";

// meta-llama/Llama-4-Scout-17B-16E-Instruct's text_config (the keys kvsim reads).
std::string llama4_config(int experts, int step, int64_t max_position) {
  return R"({"architectures": ["Llama4ForConditionalGeneration"], "torch_dtype": "bfloat16",
  "text_config": {"attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120,
    "interleave_moe_layer_step": )" +
         std::to_string(step) + R"(, "intermediate_size": 8192,
    "intermediate_size_mlp": 16384, "max_position_embeddings": )" +
         std::to_string(max_position) +
         R"(, "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48,
    "num_key_value_heads": 8, "num_local_experts": )" +
         std::to_string(experts) + R"(, "tie_word_embeddings": false, "vocab_size": 202048}})";
}

}  // namespace

TEST_CASE("gpt-oss-120b: alternating 128-token windows, sinks and biases; 116.83B total",
          "[models][hybrid][hf]") {
  // h 2880, H 64, KV 8, D 64, V 201,088, 128 experts of 2880, top-4.
  // Attention: q 2880 x 4096 = 11,796,480, k and v 2880 x 512 = 1,474,560 each, o 4096 x 2880 =
  // 11,796,480: 26,542,080; biases q 4096 + k 512 + v 512 + o 2880 = 8,000; sinks 64:
  // 26,550,144. Norms 2 x 2880 = 5,760. Router 2880 x 128 + 128 = 368,768. One expert: gate_up
  // 2880 x 5760 + 5760 and down 2880 x 2880 + 2880 = 24,891,840; 128 of them 3,186,155,520.
  // Layer: 3,213,080,192; x 36 = 115,670,886,912; + embedding and LM head 2 x 201,088 x 2880 =
  // 1,158,266,880 + final norm 2,880 = 116,829,156,672 (card: 116.83B).
  // Active: 4 experts (99,567,360) per layer: 126,492,032 x 36 = 4,553,713,152; the card's
  // 5.13B counts the LM head but not the embedding: + 579,133,440 + final norm 2,880 =
  // 5,132,849,472.
  const ModelSpec m = parse_hf_config(gpt_oss_config(36, 128), "gpt-oss-120b.json");
  CHECK(m.param_count() == 116'829'156'672);
  CHECK(m.active_param_count() - int64_t{201'088} * 2880 == 5'132'849'472);
  // Layers 0, 2, ..., 34 slide over 128 tokens; 1, 3, ..., 35 attend to everything.
  REQUIRE(m.hybrid());
  CHECK_FALSE(m.sliding_window.has_value());
  CHECK(m.local_attention->kind == ModelSpec::LocalKind::kSlidingWindow);
  CHECK(m.local_attention->size == 128);
  REQUIRE(m.local_attention->layers.size() == 18);
  CHECK(m.local_attention->layers.front() == 0);
  CHECK(m.local_attention->layers.back() == 34);
  // KV per token: 36 layers x 2 x 8 x 64 x 2 B = 73,728 (every layer stores each token's K and V
  // until its window frees the block).
  CHECK(m.kv_bytes_per_token() == 73'728);
  CHECK(m.routed_weight_dtype() == DType::kMxfp4);
  CHECK(m.weight_dtype == DType::kBf16);

  // The catalog entry is the same model.
  const ModelSpec& c = hybrid_model("gpt-oss-120b");
  CHECK(c.param_count() == m.param_count());
  CHECK(c.active_param_count() == m.active_param_count());
  CHECK(c.local_attention->layers == m.local_attention->layers);
  CHECK(c.weights_bytes() == m.weights_bytes());
}

TEST_CASE("gpt-oss-120b's weights on one GPU: MXFP4 experts, BF16 elsewhere (60.8 GiB)",
          "[models][hybrid][quant]") {
  // Per layer, bytes: norms 2 x 2880 x 2 = 11,520; attention 26,542,080 x 2 = 53,084,160, Q/K/V
  // biases 5,120 x 2 = 10,240, O bias 5,760, sinks 128; router 368,640 x 2 = 737,280 and its
  // bias 256. One MXFP4 expert: each of gate, up, down is 2880 x 2880 / 2 = 4,147,200 bytes of
  // FP4 + 90 x 2880 = 259,200 E8M0 scales = 4,406,400, x 3 = 13,219,200, and BF16 biases
  // (5760 + 2880) x 2 = 17,280: 13,236,480; x 128 = 1,694,269,440. Layer: 1,748,118,784;
  // x 36 = 62,932,276,224; + embedding and LM head 2 x 201,088 x 2880 x 2 = 2,316,533,760 + final
  // norm 5,760 = 65,248,815,744 bytes (60.77 GiB).
  CHECK(hybrid_model("gpt-oss-120b").weights_bytes() == 65'248'815'744);
  // gpt-oss-20b, 24 layers of 32 experts: router 2880 x 32 x 2 = 184,320 and its bias 64;
  // experts 32 x 13,236,480 = 423,567,360. Layer: 11,520 + 53,084,160 + 10,240 + 5,760 + 128 +
  // 184,320 + 64 + 423,567,360 = 476,863,552; x 24 = 11,444,725,248; + 2,316,533,760 + 5,760 =
  // 13,761,264,768.
  CHECK(hybrid_model("gpt-oss-20b").weights_bytes() == 13'761'264'768);
}

TEST_CASE("gpt-oss-20b: 20.91B total, 3.61B active (the card's count)", "[models][hybrid][hf]") {
  // As gpt-oss-120b with 24 layers and 32 experts. Router 2880 x 32 + 32 = 92,192; experts
  // 32 x 24,891,840 = 796,538,880; layer 26,550,144 + 5,760 + 92,192 + 796,538,880 =
  // 823,186,976; x 24 = 19,756,487,424; + 1,158,266,880 + 2,880 = 20,914,757,184 (card: 20.91B).
  // Active (LM head, no embedding): (26,550,144 + 5,760 + 92,192 + 99,567,360) x 24 =
  // 3,029,170,944 + 579,133,440 + 2,880 = 3,608,307,264 (card: 3.61B).
  const ModelSpec m = parse_hf_config(gpt_oss_config(24, 32), "gpt-oss-20b.json");
  CHECK(m.param_count() == 20'914'757'184);
  CHECK(m.active_param_count() - int64_t{201'088} * 2880 == 3'608'307'264);
  CHECK(hybrid_model("gpt-oss-20b").param_count() == 20'914'757'184);
}

TEST_CASE("Gemma-3-27B from text_config: five local layers to one global, 25.6B non-embedding",
          "[models][hybrid][hf]") {
  // h 5376, H 32, KV 16, D 128, ffn 21504, V 262,208 (the default), tied.
  // Attention: q 5376 x 4096 = 22,020,096, k and v 5376 x 2048 = 11,010,048 each, o 22,020,096:
  // 66,060,288; q/k norms 2 x 128 = 256; four norms 4 x 5376 = 21,504; MLP 3 x 5376 x 21504 =
  // 346,816,512. Layer: 412,898,560; x 62 = 25,599,710,720 (+ final norm 5,376: 25,599,716,096,
  // the report's 25,600M non-embedding). + embedding 262,208 x 5376 = 1,409,630,208:
  // 27,009,346,304.
  const ModelSpec m = parse_hf_config(kGemma3Config, "gemma-3-27b.json");
  CHECK(m.param_count() == 27'009'346'304);
  CHECK(m.param_count() - int64_t{262'208} * 5376 == 25'599'716'096);
  CHECK(m.vocab == 262'208);
  CHECK(m.max_position == 131'072);
  CHECK(m.tied_embeddings);
  CHECK(m.weight_dtype == DType::kBf16);  // torch_dtype from the top level
  // Layer i is global when (i + 1) % 6 == 0: 5, 11, ..., 59 (10 layers); 52 slide over 1024.
  REQUIRE(m.hybrid());
  CHECK(m.local_attention->size == 1024);
  CHECK(m.local_attention->layers.size() == 52);
  CHECK(std::find(m.local_attention->layers.begin(), m.local_attention->layers.end(), 5) ==
        m.local_attention->layers.end());
  CHECK(m.local_attention->layers.back() == 61);
  // KV per token: 62 x 2 x 16 x 128 x 2 = 507,904 bytes.
  CHECK(m.kv_bytes_per_token() == 507'904);
  const ModelSpec& c = hybrid_model("gemma-3-27b");
  CHECK(c.param_count() == m.param_count());
  CHECK(c.local_attention->layers == m.local_attention->layers);
  // BF16 weights: 27,009,346,304 x 2 = 54,018,692,608 bytes.
  CHECK(c.weights_bytes() == 54'018'692'608);
}

TEST_CASE("Llama 4 Scout and Maverick from text_config: chunked attention on three layers in four",
          "[models][hybrid][hf]") {
  // h 5120, H 40, KV 8, D 128. Attention: q and o 5120 x 5120 = 26,214,400 each, k and v
  // 5120 x 1024 = 5,242,880 each: 62,914,560; norms 10,240. Expert (and the shared one)
  // 3 x 5120 x 8192 = 125,829,120; dense MLP 3 x 5120 x 16384 = 251,658,240.
  // Scout, 16 experts in all 48 layers: router 81,920; layer 62,914,560 + 10,240 + 81,920 +
  // 17 x 125,829,120 = 2,202,101,760; x 48 = 105,700,884,480; + 2 x 202,048 x 5120 =
  // 2,068,971,520 + 5,120 = 107,769,861,120. Active: 62,914,560 + 10,240 + 81,920 + 2 x
  // 125,829,120 = 314,664,960 x 48 = 15,103,918,080 + 2,068,976,640 = 17,172,894,720 (17B).
  const ModelSpec scout = parse_hf_config(llama4_config(16, 1, 10485760), "scout.json");
  CHECK(scout.param_count() == 107'769'861'120);
  CHECK(scout.active_param_count() == 17'172'894'720);
  CHECK(scout.dense_layers.empty());
  REQUIRE(scout.hybrid());
  CHECK(scout.local_attention->kind == ModelSpec::LocalKind::kChunked);
  CHECK(scout.local_attention->size == 8192);
  CHECK(scout.local_attention->layers.size() == 36);  // all but 3, 7, ..., 47 (NoPE, global)
  CHECK(hybrid_model("llama-4-scout").param_count() == scout.param_count());
  CHECK(hybrid_model("llama-4-scout").local_attention->layers == scout.local_attention->layers);
  // Maverick, 128 experts on the odd layers (interleave_moe_layer_step 2), dense MLPs on the
  // even: MoE layer 62,914,560 + 10,240 + 655,360 + 129 x 125,829,120 = 16,295,536,640; dense
  // layer 62,914,560 + 10,240 + 251,658,240 = 314,583,040; 24 of each: 391,092,879,360 +
  // 7,549,992,960 + 2,068,976,640 = 400,711,848,960 (card: 400B). Active: (62,914,560 + 10,240
  // + 655,360 + 251,658,240) x 24 = 7,565,721,600 + 7,549,992,960 + 2,068,976,640 =
  // 17,184,691,200 (17B).
  const ModelSpec mav = parse_hf_config(llama4_config(128, 2, 1048576), "maverick.json");
  CHECK(mav.param_count() == 400'711'848'960);
  CHECK(mav.active_param_count() == 17'184'691'200);
  CHECK(mav.dense_layers.size() == 24);
  CHECK(mav.is_moe_layer(1));
  CHECK_FALSE(mav.is_moe_layer(0));
  CHECK(hybrid_model("llama-4-maverick").param_count() == mav.param_count());
  CHECK(hybrid_model("llama-4-maverick").dense_layers == mav.dense_layers);
  // KV per token: 48 x 2 x 8 x 128 x 2 = 196,608 bytes.
  CHECK(mav.kv_bytes_per_token() == 196'608);
}

TEST_CASE("Phi-3.5-MoE: Mixtral's experts with Q/K/V/O biases, 41.9B total, 6.6B active",
          "[models][hf]") {
  // microsoft/Phi-3.5-MoE-instruct: h 4096, H 32, KV 8, D 128, 16 experts of 6400 top-2,
  // V 32,064. Attention 41,943,040 + biases 4096 + 1024 + 1024 + 4096 = 10,240; router 65,536;
  // experts 16 x 3 x 4096 x 6400 = 1,258,291,200; norms 8,192. Layer 1,300,318,208; x 32 =
  // 41,610,182,656; + 2 x 32,064 x 4096 = 262,668,288 + 4,096 = 41,872,855,040 (card: 41.9B;
  // LayerNorm shifts and the LM-head bias left out). Active: 2 experts (157,286,400): layer
  // 199,313,408 x 32 = 6,378,029,056 + 262,672,384 = 6,640,701,440 (card: 6.6B).
  const std::string config = R"({"architectures": ["PhiMoEForCausalLM"], "attention_bias": true,
    "hidden_size": 4096, "intermediate_size": 6400, "max_position_embeddings": 131072,
    "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "num_local_experts": 16, "sliding_window": 131072,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 32064})";
  const ModelSpec m = parse_hf_config(config, "phi-3.5-moe.json");
  CHECK(m.param_count() == 41'872'855'040);
  CHECK(m.active_param_count() == 6'640'701'440);
  CHECK(m.sliding_window == 131'072);
  CHECK_FALSE(m.hybrid());
}

TEST_CASE("Qwen2's max_window_layers: the window on layers from max_window_layers only",
          "[models][hybrid][hf]") {
  const std::string base = R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 512,
    "intermediate_size": 1024, "max_position_embeddings": 4096, "num_attention_heads": 8,
    "num_key_value_heads": 2, "num_hidden_layers": 8, "vocab_size": 1000, "sliding_window": 256,
    )";
  // Layers 6 and 7 slide (i >= 6); 0-5 are global.
  const ModelSpec some =
      parse_hf_config(base + R"("use_sliding_window": true, "max_window_layers": 6})", "q.json");
  REQUIRE(some.hybrid());
  CHECK(some.local_attention->layers == std::vector<int>{6, 7});
  CHECK(some.local_attention->size == 256);
  // max_window_layers 0: every layer slides, the uniform window.
  const ModelSpec all =
      parse_hf_config(base + R"("use_sliding_window": true, "max_window_layers": 0})", "q.json");
  CHECK_FALSE(all.hybrid());
  CHECK(all.sliding_window == 256);
  // max_window_layers at or past the layers (transformers' default 28 here): no layer slides.
  const ModelSpec none = parse_hf_config(base + R"("use_sliding_window": true})", "q.json");
  CHECK_FALSE(none.hybrid());
  CHECK_FALSE(none.sliding_window.has_value());
  // use_sliding_window false: no window whatever max_window_layers says.
  const ModelSpec off =
      parse_hf_config(base + R"("use_sliding_window": false, "max_window_layers": 2})", "q.json");
  CHECK_FALSE(off.hybrid());
  CHECK_FALSE(off.sliding_window.has_value());
}

TEST_CASE("Hybrid configs' bad input: one line naming the file, line and column",
          "[models][hybrid][hf][errors]") {
  CHECK_THROWS_WITH(parse_hf_config(R"({"architectures": ["Gemma3ForConditionalGeneration"],
  "torch_dtype": "bfloat16"})",
                                    "g.json"),
                    Catch::Contains("g.json:1:1:") && Catch::Contains("text_config"));
  // layer_types of the wrong length.
  std::string bad = gpt_oss_config(36, 128);
  bad.replace(bad.find("\"num_hidden_layers\": 36"), 23, "\"num_hidden_layers\": 35");
  CHECK_THROWS_WITH(parse_hf_config(bad, "o.json"),
                    Catch::Contains("o.json:1:") && Catch::Contains("expected 35 entries"));
}

TEST_CASE("A model file's local_attention: global_every or layers, refused where it makes no sense",
          "[models][hybrid]") {
  const ModelSpec& g = hybrid_model("gemma-3-27b");
  CHECK(g.unmodelled_features().size() == 1);
  CHECK(g.unmodelled_features()[0].find("full attention") != std::string::npos);
  CHECK(hybrid_model("llama-3-8b").unmodelled_features().empty());
}
