// Multimodal configs: the vision tower and projector vLLM loads beside the language model
// (Gemma3ForConditionalGeneration, Llama4ForConditionalGeneration), counted from vision_config
// into the weights (tests/engine/vision_tower_engine_test.cc: left out with limit_mm_per_prompt
// {image: 0}).
#include <catch2/catch.hpp>

#include <string>

#include "models/hf_config.h"
#include "models/model_spec.h"
#include "models/parallelism.h"

using namespace kvsim;

namespace {

// google/gemma-3-27b-it's config.json (the keys kvsim reads).
const std::string kGemma3 = R"({
  "architectures": ["Gemma3ForConditionalGeneration"],
  "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
                  "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
                  "sliding_window": 1024},
  "torch_dtype": "bfloat16",
  "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                    "model_type": "siglip_vision_model", "num_attention_heads": 16,
                    "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": false}
})";

// meta-llama/Llama-4-Scout-17B-16E-Instruct's config.json (the keys kvsim reads).
const std::string kScout = R"({"architectures": ["Llama4ForConditionalGeneration"],
  "torch_dtype": "bfloat16",
  "text_config": {"attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120,
    "interleave_moe_layer_step": 1, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
    "max_position_embeddings": 10485760, "num_attention_heads": 40, "num_experts_per_tok": 1,
    "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 16,
    "tie_word_embeddings": false, "vocab_size": 202048},
  "vision_config": {"hidden_size": 1408, "image_size": 336, "intermediate_size": 5632,
    "num_attention_heads": 16, "num_channels": 3, "num_hidden_layers": 34, "patch_size": 14,
    "pixel_shuffle_ratio": 0.5, "projector_input_dim": 4096, "projector_output_dim": 4096,
    "vision_output_dim": 4096}})";

}  // namespace

TEST_CASE("Gemma 3's SigLIP tower and projector join the weights", "[models][hf][vision]") {
  // h 1152, ffn 4304, 27 layers, 14-pixel patches of an 896-pixel image (64 x 64 = 4,096).
  // A layer: q, k, v, out 4 x (1152^2 + 1152) = 5,313,024; fc1 1152 x 4304 + 4304 and fc2
  // 4304 x 1152 + 1152 = 9,921,872; two LayerNorms 4 x 1152 = 4,608: 15,239,504, x 27 =
  // 411,466,608. Patch conv 3 x 14 x 14 x 1152 + 1152 = 678,528; positions 4,096 x 1152 =
  // 4,718,592; post LayerNorm 2,304. Projector 1152 x 5376 + 1152 = 6,194,304. In all
  // 423,060,336 (the Gemma 3 report's "417M" encoder plus the projector), 846,120,672 bytes
  // in BF16 beside the language model's own.
  const ModelSpec m = parse_hf_config(kGemma3, "gemma-3-27b-it.json");
  CHECK(m.vision_params == 423'060'336);
  ModelSpec text = m;
  text.vision_params = 0;
  CHECK(m.weights_bytes() - text.weights_bytes() == 846'120'672);
  // Tensor parallelism splits it with the rest (vLLM's SigLIP uses parallel linears): under
  // TP 2 each GPU holds half (846,120,672 / 2 = 423,060,336 bytes) more than the text model.
  const Parallelism tp2{.tensor = 2};
  CHECK(weights_bytes_on_gpu(m, tp2, 0) - weights_bytes_on_gpu(text, tp2, 0) == 423'060'336);
}

TEST_CASE("Llama 4's vision model, adapter and projector join the weights",
          "[models][hf][vision]") {
  // h 1408, ffn 5632, 34 layers, 14-pixel patches of 336 (24 x 24 = 576). A layer: attention
  // 4 x (1408^2 + 1408) = 7,935,488, MLP 2 x 1408 x 5632 + 5632 + 1408 = 15,866,752, two
  // LayerNorms 5,632: 23,807,872, x 34 = 809,467,648. Patches 3 x 14 x 14 x 1408 = 827,904,
  // class token 1,408, positions 577 x 1408 = 812,416; pre and post LayerNorms 5,632. Pixel
  // shuffle adapter 5632 x 4096 + 4096 x 4096 = 39,845,888; projector 4096 x 5120 =
  // 20,971,520. In all 871,932,416 parameters, 1,743,864,832 bytes in BF16.
  const ModelSpec m = parse_hf_config(kScout, "scout.json");
  CHECK(m.vision_params == 871'932'416);
  ModelSpec text = m;
  text.vision_params = 0;
  CHECK(m.weights_bytes() - text.weights_bytes() == 1'743'864'832);
}
