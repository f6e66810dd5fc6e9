// Models from Hugging Face config.json files (tests/data/hf-configs, written from the published
// configs): each reads to the catalog entry's figures where kvsim has one, or to the published
// parameter count; bad files fail with one line naming the file and the place.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/hf_config.h"
#include "models/parallelism.h"

using namespace kvsim;
using Catch::Matchers::Contains;

namespace {
const std::string kHfConfigDir = std::string(KVSIM_TEST_DATA) + "/hf-configs/";

ModelSpec hf_model(const std::string& file) { return read_hf_config(kHfConfigDir + file); }

// The figures kvsim takes from a model: a config.json must give the catalog entry's exactly.
void check_same_as_catalog(const ModelSpec& m, const std::string& catalog_name) {
  const ModelSpec& c = Catalog::builtin().model(catalog_name);
  INFO(catalog_name);
  CHECK(m.layers == c.layers);
  CHECK(m.heads == c.heads);
  CHECK(m.kv_heads == c.kv_heads);
  CHECK(m.head_dim == c.head_dim);
  CHECK(m.hidden == c.hidden);
  CHECK(m.ffn == c.ffn);
  CHECK(m.vocab == c.vocab);
  CHECK(m.max_position == c.max_position);
  CHECK(m.num_experts == c.num_experts);
  CHECK(m.experts_per_token == c.experts_per_token);
  CHECK(m.qkv_bias == c.qkv_bias);
  CHECK(m.tied_embeddings == c.tied_embeddings);
  CHECK(m.sliding_window == c.sliding_window);
  CHECK(m.param_count() == c.param_count());
  CHECK(m.kv_bytes_per_token() == c.kv_bytes_per_token());
  CHECK(m.weights_bytes() == c.weights_bytes());
}
}  // namespace

TEST_CASE("Llama-3-8B's config.json reads to the catalog entry", "[models][hf]") {
  // 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 131,072 bytes per token. Parameters:
  // embeddings and LM head 2 x 128,256 x 4,096 = 1,050,673,152; per layer Q and O 2 x 4,096^2 =
  // 33,554,432, K and V 2 x 4,096 x 1,024 = 8,388,608, MLP 3 x 4,096 x 14,336 = 176,160,768,
  // norms 8,192: 218,112,000 x 32 = 6,979,584,000; final norm 4,096: 8,030,261,248 (8.0B).
  const ModelSpec m = hf_model("llama-3-8b.json");
  CHECK(m.kv_bytes_per_token() == 131072);
  CHECK(m.param_count() == 8030261248);
  CHECK(m.weight_dtype == DType::kBf16);  // torch_dtype bfloat16
  CHECK_FALSE(m.sliding_window.has_value());
  check_same_as_catalog(m, "llama-3-8b");
}

TEST_CASE("Mistral-7B-v0.1's config.json carries its 4,096-token window", "[models][hf]") {
  // Llama-3-8B's attention and MLP with a 32,000 vocabulary: 8,030,261,248 - 2 x (128,256 -
  // 32,000) x 4,096 = 7,241,732,096 parameters; 131,072 KV bytes per token.
  const ModelSpec m = hf_model("mistral-7b-v0.1.json");
  CHECK(m.param_count() == 7241732096);
  CHECK(m.kv_bytes_per_token() == 131072);
  CHECK(m.sliding_window == 4096);
  check_same_as_catalog(m, "mistral-7b");
}

TEST_CASE("Qwen2.5-7B's config.json: Q/K/V biases, and its window off (use_sliding_window false)",
          "[models][hf]") {
  // 28 layers x 4 KV heads x 128 x 2 x 2 bytes = 57,344 bytes per token. sliding_window 131072
  // is ignored: use_sliding_window is false.
  const ModelSpec m = hf_model("qwen2.5-7b.json");
  CHECK(m.kv_bytes_per_token() == 57344);
  CHECK(m.qkv_bias);
  CHECK_FALSE(m.sliding_window.has_value());
  check_same_as_catalog(m, "qwen2.5-7b");
}

TEST_CASE("Mixtral-8x7B's config.json: 8 experts, top-2, window null", "[models][hf]") {
  const ModelSpec m = hf_model("mixtral-8x7b-instruct-v0.1.json");
  CHECK(m.num_experts == 8);
  CHECK(m.experts_per_token == 2);
  CHECK_FALSE(m.sliding_window.has_value());  // "sliding_window": null
  CHECK(m.kv_bytes_per_token() == 131072);
  check_same_as_catalog(m, "mixtral-8x7b");
}

TEST_CASE("Qwen3-32B's config.json: per-head Q/K norms, weights on one and two GPUs",
          "[models][hf]") {
  // KV: 2 x 64 layers x 8 KV heads x 128 x 2 bytes = 262,144 bytes per token. Per layer: Q
  // 5,120 x 8,192 = 41,943,040, K and V 2 x 5,120 x 1,024 = 10,485,760, O 8,192 x 5,120 =
  // 41,943,040, MLP 3 x 5,120 x 25,600 = 393,216,000, norms 2 x 5,120 + q_norm and k_norm 2 x 128
  // = 10,496: 487,598,336 x 64 = 31,206,293,504; embeddings and LM head (untied) 2 x 151,936 x
  // 5,120 = 1,555,824,640; final norm 5,120: 32,762,123,264 (the model card's "32.8B").
  const ModelSpec m = hf_model("qwen3-32b.json");
  CHECK(m.qk_norm);
  CHECK_FALSE(m.qkv_bias);                    // attention_bias false
  CHECK_FALSE(m.sliding_window.has_value());  // use_sliding_window false
  CHECK(m.head_dim == 128);
  CHECK(m.kv_bytes_per_token() == 262144);
  CHECK(m.param_count() == 32762123264);
  CHECK(m.weights_bytes() == 2 * int64_t{32762123264});  // bf16
  // TP 2, per GPU: the linear layers halve (975,175,680 / 2 = 487,587,840 bytes a layer), the
  // norms are replicated (2 x 5,120 x 2 + 2 x 128 x 2 = 20,992): 487,608,832 x 64 =
  // 31,206,965,248; vocabulary 151,936 (a multiple of 64) split in two: 75,968 x 5,120 x 2 x 2
  // (embedding and LM head) = 1,555,824,640; final norm 10,240: 32,762,800,128 bytes. KV per
  // GPU: 4 KV heads, 131,072 bytes per token.
  CHECK(weights_bytes_on_gpu(m, Parallelism{.tensor = 2}, 0) == 32762800128);
  CHECK(kv_bytes_per_token_on_gpu(m, Parallelism{.tensor = 2}, 0) == 131072);
}

TEST_CASE("Phi-3-mini-4k's config.json reads to its published 3.8B parameters", "[models][hf]") {
  // MHA: 32 heads of 3,072 / 32 = 96, 32 KV heads. Per layer Q, K, V, O 4 x 3,072^2 =
  // 37,748,736, MLP 3 x 3,072 x 8,192 = 75,497,472, norms 6,144: 113,252,352 x 32 =
  // 3,624,075,264; embeddings and LM head 2 x 32,064 x 3,072 = 197,001,216; final norm 3,072:
  // 3,821,079,552, 0.55% over the model card's 3.8B. KV: 2 x 32 x 32 x 96 x 2 = 393,216 bytes.
  const ModelSpec m = hf_model("phi-3-mini-4k-instruct.json");
  CHECK(m.head_dim == 96);
  CHECK(m.param_count() == 3821079552);
  CHECK(std::abs(static_cast<double>(m.param_count()) / 3.8e9 - 1) < 0.01);
  CHECK(m.kv_bytes_per_token() == 393216);
  CHECK(m.sliding_window == 2047);
  CHECK(m.max_position == 4096);
}

TEST_CASE("Pythia-6.9B's (GPT-NeoX) config.json: MHA and a two-matrix MLP", "[models][hf]") {
  // No num_key_value_heads: every head has its own K and V (32). MLP up and down only:
  // 2 x 4,096 x 16,384 = 134,217,728 per layer; attention 4 x 4,096^2 = 67,108,864; norms
  // 8,192: 201,334,784 x 32 = 6,442,713,088; embeddings and unembedding 2 x 50,432 x 4,096 =
  // 413,138,944; final norm 4,096: 6,855,856,128. The Pythia paper's count, 6,857,302,016,
  // also has the biases and LayerNorm shifts kvsim leaves out: 0.02% under it.
  // KV: 2 x 32 layers x 32 heads x 128 x 2 bytes = 524,288 bytes per token (FP16).
  const ModelSpec m = hf_model("pythia-6.9b.json");
  CHECK(m.kv_heads == 32);
  CHECK_FALSE(m.gated_mlp);
  CHECK(m.param_count() == 6855856128);
  CHECK(std::abs(static_cast<double>(m.param_count()) / 6857302016.0 - 1) < 0.01);
  CHECK(m.kv_bytes_per_token() == 524288);
  CHECK(m.weight_dtype == DType::kFp16);
  CHECK(m.max_position == 2048);
  // Weights: 6,855,856,128 x 2 bytes.
  CHECK(m.weights_bytes() == 13711712256);
}

TEST_CASE("a config.json of an architecture kvsim cannot model is one line naming it",
          "[models][hf][bad-input]") {
  // "architectures" is on line 2, column 3 of the file.
  try {
    hf_model("bad-architecture.json");
    FAIL("no error");
  } catch (const InputError& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg,
               Contains("bad-architecture.json:2:3: architecture 'MambaForCausalLM' is not "
                        "one kvsim can model (supported: LlamaForCausalLM, "
                        "MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM, "
                        "Qwen3ForCausalLM, Phi3ForCausalLM, PhiForCausalLM, GPTNeoXForCausalLM, "
                        "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, DeepseekV2ForCausalLM, "
                        "DeepseekV3ForCausalLM, GptOssForCausalLM, Gemma3ForCausalLM, "
                        "Gemma3ForConditionalGeneration, Llama4ForConditionalGeneration, "
                        "PhiMoEForCausalLM)"));
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("malformed JSON in a config.json names its line and column", "[models][hf][bad-input]") {
  // Line 4 lacks its comma: the parser stops at the end of line 5's key "num_hidden_layers",
  // which starts at column 3 and ends at column 3 + 19 - 1 = 21.
  try {
    hf_model("malformed.json");
    FAIL("no error");
  } catch (const InputError& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Contains("malformed.json:5:21: malformed JSON: syntax error while parsing "
                             "object - unexpected string literal; expected '}'"));
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("a config.json missing a key or with a bad value says which and where",
          "[models][hf][bad-input]") {
  CHECK_THROWS_WITH(parse_hf_config("{\"architectures\": [\"LlamaForCausalLM\"]}", "x.json"),
                    Contains("x.json:1:1: config.json has no 'hidden_size'"));
  CHECK_THROWS_WITH(
      parse_hf_config("{\"architectures\": [\"LlamaForCausalLM\"],\n \"hidden_size\": \"big\"}",
                      "y.json"),
      Contains("y.json:2:2: 'hidden_size': expected an integer in [1, 1048576], got \"big\""));
  CHECK_THROWS_WITH(parse_hf_config("[1, 2]", "z.json"),
                    Contains("z.json:1:1: expected a config.json object, got array"));
}

TEST_CASE("load_model takes a catalog name, a config.json or a kvsim model YAML", "[models][hf]") {
  const Catalog& c = Catalog::builtin();
  CHECK(load_model("llama-3-8b", c).param_count() == 8030261248);
  // A relative path is read from base_dir.
  CHECK(load_model("llama-3-8b.json", c, kHfConfigDir).param_count() == 8030261248);
  CHECK(load_model(kHfConfigDir + "pythia-6.9b.json", c).kv_bytes_per_token() == 524288);
  CHECK_THROWS_WITH(load_model("llama-3-8", c), Contains("unknown model 'llama-3-8'"));
  CHECK_THROWS_WITH(load_model("missing.json", c, kHfConfigDir),
                    Contains("missing.json: no such model file (a Hugging Face config.json)"));
}

TEST_CASE("load_model reads a kvsim model YAML file", "[models][hf]") {
  // tiny-gqa.yaml: 2 layers x 2 KV heads x 16 x 2 (K, V) x 2 bytes = 256 bytes per token.
  // Parameters: embeddings 2 x 1,000 x 64 = 128,000; per layer Q and O 2 x 64 x 64 = 8,192,
  // K and V 2 x 64 x 32 = 4,096, MLP 3 x 64 x 128 = 24,576, norms 128: 36,992 x 2 = 73,984;
  // final norm 64: 202,048.
  const ModelSpec m =
      load_model("tiny-gqa.yaml", Catalog::builtin(), std::string(KVSIM_TEST_DATA) + "/models");
  CHECK(m.name == "tiny-gqa");
  CHECK(m.kv_bytes_per_token() == 256);
  CHECK(m.param_count() == 202048);
  CHECK(m.sliding_window == 512);
}

TEST_CASE("docs/models.md lists every supported config.json architecture", "[models][hf][docs]") {
  // The table's first column names each architecture in backquotes; hf_architectures() is the
  // one registration site.
  std::ifstream in(std::string(KVSIM_SOURCE_DIR) + "/docs/models.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  for (const HfArchitecture& a : hf_architectures()) {
    INFO(a.name);
    CHECK_THAT(text.str(), Contains(std::string("| `") + a.name + "` | " + a.family + " |"));
  }
}
