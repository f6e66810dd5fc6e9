// Quantized weights read from a config.json's quantization_config (FP8 per-tensor and 128 x 128
// blocks, MXFP4 experts, NVFP4, AWQ/GPTQ INT4): weight bytes derived by hand from the scale
// layouts of docs/memory.md "Quantized weights", and the GEMM peak each runs at.
#include <catch2/catch.hpp>

#include <string>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/hf_config.h"
#include "models/latency/latency_model.h"
#include "models/parallelism.h"

using namespace kvsim;
using Catch::Matchers::Contains;

namespace {
// Llama-3-8B's config.json with a quantization_config.
ModelSpec llama_with(const std::string& quant) {
  return parse_hf_config(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
    "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16", "quantization_config": )" +
                             quant + "}",
                         "quant.json");
}
}  // namespace

TEST_CASE("AWQ and GPTQ INT4 from quantization_config", "[models][quant][hf]") {
  // AWQ, group 128: the figure kvsim's int4 gives Llama-3-8B (docs/memory.md): 5,727,854,592.
  const ModelSpec awq =
      llama_with(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true})");
  CHECK(awq.weight_dtype == DType::kInt4);
  CHECK(awq.weight_group == 128);
  CHECK(awq.weights_bytes() == 5'727'854'592);
  // GPTQ with group_size -1: one FP16 scale and one packed zero per column. Per layer: q, o
  // 4096 x 4096 / 2 + 4096 x 2 + 512 x 4 = 8,398,848 each; k, v 4096 x 1024 / 2 + 1024 x 2 +
  // 128 x 4 = 2,099,712 each; gate, up 4096 x 14336 / 2 + 14336 x 2 + 1792 x 4 = 29,395,968
  // each; down 14336 x 4096 / 2 + 4096 x 2 + 512 x 4 = 29,370,368; norms 16,384:
  // 109,175,808 x 32 = 3,493,625,856; embedding and LM head 2,101,346,304; final norm 8,192:
  // 5,594,980,352.
  const ModelSpec gptq =
      llama_with(R"({"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": false})");
  CHECK(gptq.weights_bytes() == 5'594'980'352);
  CHECK_THROWS_WITH(llama_with(R"({"quant_method": "gptq", "bits": 8, "group_size": 128})"),
                    Contains("gptq with 8 bits is not modelled"));
}

TEST_CASE("NVFP4 (modelopt) and per-tensor FP8 from quantization_config", "[models][quant][hf]") {
  // NVFP4: in x out / 2 + one FP8 byte per 16 inputs of a column + 8 (tensor and input scales).
  // Per layer: q, o 8,388,608 + 256 x 4096 + 8 = 9,437,192 each; k, v 2,097,152 + 256 x 1024
  // + 8 = 2,359,304 each; gate, up 29,360,128 + 256 x 14336 + 8 = 33,030,152 each; down
  // 29,360,128 + 896 x 4096 + 8 = 33,030,152; norms 16,384: 122,699,832 x 32 = 3,926,394,624;
  // embedding and LM head 2,101,346,304; final norm 8,192: 6,027,749,120.
  const ModelSpec nv = llama_with(R"({"quant_method": "modelopt", "quant_algo": "NVFP4",
                                      "group_size": 16})");
  CHECK(nv.weight_dtype == DType::kNvfp4);
  CHECK(nv.weights_bytes() == 6'027'749'120);
  // FP8 per tensor: the figure of weights_dtype fp8 (one 4-byte scale per matrix).
  const ModelSpec fp8 = llama_with(R"({"quant_method": "fp8", "activation_scheme": "dynamic"})");
  ModelSpec by_engine = Catalog::builtin().model("llama-3-8b");
  by_engine.weight_dtype = DType::kFp8;
  CHECK(fp8.weight_group == 0);
  CHECK(fp8.weights_bytes() == by_engine.weights_bytes());
  CHECK_THROWS_WITH(llama_with(R"({"quant_method": "bitsandbytes"})"),
                    Contains("quant.json") && Contains("quant_method \"bitsandbytes\" is not one"));
  CHECK_THROWS_WITH(llama_with(R"({"quant_method": "fp8", "weight_block_size": [128, 64]})"),
                    Contains("expected a square block"));
}

TEST_CASE("MXFP4 quantizes a MoE model's experts only", "[models][quant][hf][moe]") {
  // Mixtral-8x7B's shape with quant_method mxfp4 (as gpt-oss ships its experts): attention,
  // router, embedding and LM head stay BF16. An expert: gate and up 4096 x 14336 / 2 + 128 x
  // 14336 = 31,195,136 each, down 14336 x 4096 / 2 + 448 x 4096 = 31,195,136: 93,585,408;
  // 8 x 32 of them 23,957,864,448 in place of BF16's 90,194,313,216. The rest of the BF16
  // total 93,405,585,408 is 3,211,272,192: 27,169,136,640.
  const ModelSpec m = parse_hf_config(R"({"architectures": ["MixtralForCausalLM"],
    "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 32000,
    "max_position_embeddings": 32768, "num_local_experts": 8, "num_experts_per_tok": 2,
    "torch_dtype": "bfloat16", "quantization_config": {"quant_method": "mxfp4"}})",
                                      "mx.json");
  CHECK(m.weight_dtype == DType::kBf16);
  CHECK(m.routed_weight_dtype() == DType::kMxfp4);
  CHECK(m.weights_bytes() == 27'169'136'640);
}

TEST_CASE("FP4 weights run at the FP4 tensor peak where the GPU has one", "[latency][quant]") {
  // NVFP4 Llama-3-8B, a 4096-token prefill: the qkv GEMM's compute time at the FP4 peak
  // (RTX PRO 6000: 2,015.2 TFLOP/s) is a quarter of BF16's (503.8); on an A100 (no FP4 peak)
  // it runs dequantised at the BF16 peak.
  const ModelSpec nv = llama_with(R"({"quant_method": "modelopt", "quant_algo": "NVFP4"})");
  ModelSpec bf = nv;
  bf.weight_dtype = DType::kBf16;
  const auto compute = [](const ModelSpec& m, const char* gpu) {
    const GpuSpec& g = Catalog::builtin().gpu(gpu);
    LatencyModel lm(m, g, default_profile(g), AttentionKind::kFlash);
    BatchShape b;
    b.prefill.push_back(PrefillChunk{4096, 0, true});
    for (const OpCost& o : lm.lower_bound(b).ops) {
      if (o.name == "qkv_proj") return o.compute_s;
    }
    return -1.0;
  };
  CHECK(compute(nv, "rtx-pro-6000") == Approx(compute(bf, "rtx-pro-6000") / 4));
  CHECK(compute(nv, "a100-sxm4-80gb") == Approx(compute(bf, "a100-sxm4-80gb")));
}
