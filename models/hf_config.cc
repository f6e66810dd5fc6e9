#include "models/hf_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/echo_text.h"
#include "core/errors.h"

namespace kvsim {

// The one registration site: every architecture kvsim reads, with what sets it apart. Keys common
// to all (hidden_size, num_attention_heads, num_hidden_layers, intermediate_size, vocab_size,
// max_position_embeddings, head_dim, tie_word_embeddings, torch_dtype) are read for each.
const std::vector<HfArchitecture>& hf_architectures() {
  static const std::vector<HfArchitecture> table = {
      // name                  family     gqa    bias   gated  moe    switch window qk_norm
      {"LlamaForCausalLM", "Llama", true, false, true, false, false, false},
      {"MistralForCausalLM", "Mistral", true, false, true, false, false, true},
      {"MixtralForCausalLM", "Mixtral", true, false, true, true, false, true},
      {"Qwen2ForCausalLM", "Qwen2", true, true, true, false, true, true},
      {"Qwen3ForCausalLM", "Qwen3", true, false, true, false, true, true, true},
      {"Phi3ForCausalLM", "Phi-3", true, false, true, false, false, true},
      {"PhiForCausalLM", "Phi-2", true, false, false, false, false, false},
      {"GPTNeoXForCausalLM", "GPT-NeoX (Pythia)", false, false, false, false, false, false},
      {"Qwen2MoeForCausalLM", "Qwen2-MoE", true, true, true, false, true, true, false, HfExtra::kQwenMoe},
      {"Qwen3MoeForCausalLM", "Qwen3-MoE", true, false, true, false, true, true, true, HfExtra::kQwenMoe},
      {"DeepseekV2ForCausalLM", "DeepSeek-V2", false, false, true, false, false, false,
       false, HfExtra::kDeepseekMla},
      {"DeepseekV3ForCausalLM", "DeepSeek-V3", false, false, true, false, false, false,
       false, HfExtra::kDeepseekMla},
  };
  return table;
}

namespace {

using HfJson = nlohmann::json;

// "line:col" (1-based) of byte offset `at` of `text`.
std::string hf_line_col(const std::string& text, size_t at) {
  at = std::min(at, text.size());
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return fmt::format("{}:{}", line, at - line_start + 1);
}

// What a value is, for "got ..." in a message: a scalar as written (a string cut and escaped), a
// list or an object by its kind and size. Never the value's dump: a key holding a 100,000-deep
// list would make a 100 KB message, or overflow the stack while dumping it.
std::string hf_describe(const HfJson& v) {
  switch (v.type()) {
    case HfJson::value_t::string: return fmt::format("\"{}\"", echo_text(v.get_ref<const std::string&>()));
    case HfJson::value_t::array: return fmt::format("a list of {} element(s)", v.size());
    case HfJson::value_t::object: return fmt::format("an object of {} key(s)", v.size());
    case HfJson::value_t::null: return "null";
    default: return v.dump();  // a number or a boolean: short
  }
}

// nlohmann's message without its "[json.exception.<kind>.<id>] " prefix and "parse error at line
// L, column C: " (kvsim says where itself), with the quoted input it echoes ("last read:
// '...'", "number overflow parsing '...'") cut and escaped.
std::string hf_json_detail(const std::string& what) {
  std::string d = what;
  if (d.rfind("[json.exception.", 0) == 0) {
    if (const size_t end = d.find("] "); end != std::string::npos) d = d.substr(end + 2);
  }
  if (d.rfind("parse error", 0) == 0) {
    if (const size_t colon = d.find(": "); colon != std::string::npos) d = d.substr(colon + 2);
  }
  const size_t open = d.find('\''), close = d.rfind('\'');
  if (open == std::string::npos || close <= open) return echo_text(d, 200);
  return echo_text(d.substr(0, open + 1), 200) + echo_text(d.substr(open + 1, close - open - 1)) +
         echo_text(d.substr(close), 200);
}

// Builds the document as nlohmann's own DOM parser does, but keeps where the parse stopped and
// why for every error the parser reports, not only syntax errors: a number too large for a
// double ("1e400") is reported the same way, with its position.
class HfDomBuilder : public nlohmann::json_sax<HfJson> {
 public:
  explicit HfDomBuilder(HfJson& root) : dom_(root, /*allow_exceptions=*/false) {}
  bool null() override { return dom_.null(); }
  bool boolean(bool v) override { return dom_.boolean(v); }
  bool number_integer(number_integer_t v) override { return dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) override { return dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) override { return dom_.number_float(v, s); }
  bool string(string_t& v) override { return dom_.string(v); }
  bool binary(binary_t& v) override { return dom_.binary(v); }
  bool start_object(std::size_t n) override { return dom_.start_object(n); }
  bool key(string_t& k) override { return dom_.key(k); }
  bool end_object() override { return dom_.end_object(); }
  bool start_array(std::size_t n) override { return dom_.start_array(n); }
  bool end_array() override { return dom_.end_array(); }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    position_ = position;
    what_ = e.what();
    return false;
  }
  // Set when the parse failed: the 1-based offset of the last character read, and why.
  std::optional<std::pair<std::size_t, std::string>> error() const {
    if (what_.empty()) return std::nullopt;
    return std::make_pair(position_, what_);
  }

 private:
  nlohmann::detail::json_sax_dom_parser<HfJson> dom_;
  std::size_t position_ = 0;
  std::string what_;
};

// Reads keys of one config.json, naming the file and the key's place in messages.
class HfReader {
 public:
  HfReader(const HfJson& j, const std::string& text, const std::string& source)
      : j_(j), text_(text), source_(source) {}

  // "file:line:col" of `"key"` in the text (the file's start when it is not there).
  std::string where(const std::string& key) const {
    const size_t at = text_.find("\"" + key + "\"");
    return fmt::format("{}:{}", source_, hf_line_col(text_, at == std::string::npos ? 0 : at));
  }
  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw InputError(fmt::format("{}: {}", where(key), message));
  }
  // A key present and not null.
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  int64_t integer(const std::string& key, int64_t min, int64_t max) const {
    if (!has(key)) fail(key, fmt::format("config.json has no '{}'", key));
    return integer_at(key, min, max);
  }
  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) const {
    return has(key) ? integer_at(key, min, max) : fallback;
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const HfJson& v = j_.at(key);
    if (!v.is_boolean()) {
      fail(key, fmt::format("'{}': expected true or false, got {}", key, hf_describe(v)));
    }
    return v.get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const HfJson& v = j_.at(key);
    if (!v.is_string()) {
      fail(key, fmt::format("'{}': expected a string, got {}", key, hf_describe(v)));
    }
    return v.get<std::string>();
  }

 private:
  int64_t integer_at(const std::string& key, int64_t min, int64_t max) const {
    const HfJson& v = j_.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max) {
      fail(key, fmt::format("'{}': expected an integer in [{}, {}], got {}", key, min, max,
                            hf_describe(v)));
    }
    return v.get<int64_t>();
  }

  const HfJson& j_;
  const std::string& text_;
  const std::string& source_;
};

// torch_dtype as vLLM's dtype "auto" takes it: BF16 stays BF16, FP16 and FP32 run as FP16.
DType hf_dtype(const HfReader& r) {
  const std::string key = r.has("torch_dtype") ? "torch_dtype" : "dtype";  // newer transformers
  const std::string t = r.string(key, "float16");
  if (t == "bfloat16") return DType::kBf16;
  if (t == "float16" || t == "float32") return DType::kFp16;
  r.fail(key, fmt::format("'{}': expected bfloat16, float16 or float32, got \"{}\"", key,
                          echo_text(t)));
}

// An integer list (e.g. mlp_only_layers), empty when absent or null.
std::vector<int64_t> hf_int_list(const HfJson& j, const HfReader& r, const std::string& key,
                                 int64_t max) {
  std::vector<int64_t> out;
  if (!r.has(key)) return out;
  const HfJson& v = j.at(key);
  if (!v.is_array()) r.fail(key, fmt::format("'{}': expected a list of integers", key));
  for (const HfJson& e : v) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > max) {
      r.fail(key, fmt::format("'{}': expected integers in [0, {}], got {}", key, max, e.dump()));
    }
    out.push_back(e.get<int64_t>());
  }
  return out;
}

// Qwen2-MoE and Qwen3-MoE (vLLM qwen2_moe.py / qwen3_moe.py, the decoder layer's choice of MLP):
// layer i holds the experts unless it is in mlp_only_layers, when num_experts > 0 and
// (i + 1) % decoder_sparse_step == 0; else a dense MLP of intermediate_size. Qwen2-MoE adds one
// shared expert of shared_expert_intermediate_size.
void read_qwen_moe(const HfJson& j, const HfReader& r, ModelSpec& m) {
  const int experts = static_cast<int>(r.integer("num_experts", 0, 0, 4096));
  if (experts <= 1) return;  // a dense model in MoE clothing
  m.num_experts = experts;
  m.experts_per_token = static_cast<int>(r.integer("num_experts_per_tok", 1, experts));
  m.expert_ffn = static_cast<int>(r.integer("moe_intermediate_size", 1, 1 << 22));
  m.shared_expert_ffn =
      static_cast<int>(r.integer("shared_expert_intermediate_size", 0, 0, 1 << 22));
  const int64_t step = r.integer("decoder_sparse_step", 1, 1, m.layers);
  const std::vector<int64_t> only = hf_int_list(j, r, "mlp_only_layers", m.layers - 1);
  for (int i = 0; i < m.layers; ++i) {
    const bool dense = std::find(only.begin(), only.end(), i) != only.end() || (i + 1) % step != 0;
    if (dense) m.dense_layers.push_back(i);
  }
}

// DeepSeek-V2/V3 and Kimi-K2 (vLLM deepseek_v2.py: DeepseekV2DecoderLayer, DeepseekV2MoE,
// DeepseekV2MLAAttention). MLA: the query/key head is qk_nope_head_dim + qk_rope_head_dim, one
// latent KV "head". MoE: layer i holds the experts when n_routed_experts is set,
// i >= first_k_dense_replace and i % moe_layer_freq == 0; its shared experts are one MLP of
// n_shared_experts x moe_intermediate_size.
void read_deepseek(const HfJson& j, const HfReader& r, ModelSpec& m) {
  (void)j;
  m.kv_lora_rank = static_cast<int>(r.integer("kv_lora_rank", 1, 1 << 16));
  m.q_lora_rank = static_cast<int>(r.integer("q_lora_rank", 0, 0, 1 << 16));
  m.qk_rope_head_dim = static_cast<int>(r.integer("qk_rope_head_dim", 0, 4096));
  const int nope = static_cast<int>(r.integer("qk_nope_head_dim", 1, 4096));
  m.head_dim = nope + m.qk_rope_head_dim;
  m.v_head_dim = static_cast<int>(r.integer("v_head_dim", 1, 4096));
  m.kv_heads = 1;
  m.mtp_layers = static_cast<int>(r.integer("num_nextn_predict_layers", 0, 0, 16));
  const int experts = static_cast<int>(r.integer("n_routed_experts", 0, 0, 4096));
  if (experts <= 1) return;
  m.num_experts = experts;
  m.experts_per_token = static_cast<int>(r.integer("num_experts_per_tok", 1, experts));
  m.expert_ffn = static_cast<int>(r.integer("moe_intermediate_size", 1, 1 << 22));
  m.shared_expert_ffn =
      static_cast<int>(r.integer("n_shared_experts", 0, 0, 64)) * m.expert_ffn;
  const int64_t first_dense = r.integer("first_k_dense_replace", 0, 0, m.layers);
  const int64_t freq = r.integer("moe_layer_freq", 1, 1, m.layers);
  for (int i = 0; i < m.layers; ++i) {
    if (i < first_dense || i % freq != 0) m.dense_layers.push_back(i);
  }
}

// quantization_config, as vLLM picks a quantization method from its quant_method
// (vllm/model_executor/layers/quantization/: Fp8Config.from_config reads weight_block_size,
// Mxfp4Config, ModelOptNvFp4Config's quant_algo, AWQConfig and GPTQConfig's bits and
// group_size). A method kvsim cannot model is an error naming it.
void read_quantization(const HfJson& j, const HfReader& r, ModelSpec& m) {
  if (!r.has("quantization_config")) return;
  const HfJson& q = j.at("quantization_config");
  const std::string key = "quant_method";
  if (!q.is_object() || !q.contains(key) || !q.at(key).is_string()) {
    r.fail("quantization_config", "'quantization_config': expected an object with a quant_method");
  }
  std::string method = q.at(key).get<std::string>();
  std::transform(method.begin(), method.end(), method.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto integer = [&](const char* k, int64_t fallback) -> int64_t {
    if (!q.contains(k) || q.at(k).is_null()) return fallback;
    if (!q.at(k).is_number_integer()) {
      r.fail(k, fmt::format("'{}': expected an integer, got {}", k, q.at(k).dump()));
    }
    return q.at(k).get<int64_t>();
  };
  if (method == "fp8") {
    m.weight_dtype = DType::kFp8;
    if (q.contains("weight_block_size") && !q.at("weight_block_size").is_null()) {
      const HfJson& b = q.at("weight_block_size");
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || b[0] != b[1] ||
          b[0].get<int64_t>() < 1 || b[0].get<int64_t>() > 4096) {
        r.fail("weight_block_size", fmt::format("'weight_block_size': expected a square block "
                                                "[b, b] with 1 <= b <= 4096, got {}", b.dump()));
      }
      m.weight_group = static_cast<int>(b[0].get<int64_t>());
    }
  } else if (method == "mxfp4") {
    // gpt-oss: only the experts are MXFP4 (modules_to_not_convert lists attention, router,
    // embedding and LM head); a dense model's linear layers all.
    if (m.moe()) {
      m.expert_weight_dtype = DType::kMxfp4;
    } else {
      m.weight_dtype = DType::kMxfp4;
    }
  } else if (method == "modelopt") {
    const std::string algo = q.value("quant_algo", "");
    if (algo == "FP8") {
      m.weight_dtype = DType::kFp8;
    } else if (algo == "NVFP4") {
      m.weight_dtype = DType::kNvfp4;
    } else {
      r.fail("quant_algo", fmt::format("modelopt quant_algo \"{}\" is not one kvsim models "
                                       "(FP8, NVFP4)", echo_text(algo)));
    }
  } else if (method == "awq" || method == "gptq") {
    const int64_t bits = integer(method == "awq" ? "bits" : "bits", 4);
    if (bits != 4) {
      r.fail("bits", fmt::format("{} with {} bits is not modelled (4-bit only)", method, bits));
    }
    m.weight_dtype = DType::kInt4;
    const int64_t group = integer("group_size", 128);
    // -1: one group per column (a scale per output channel).
    m.weight_group = group < 0 ? 1 << 30 : static_cast<int>(std::min<int64_t>(group, 1 << 30));
    if (group == 0) r.fail("group_size", "'group_size': expected -1 or a positive integer");
  } else {
    r.fail(key, fmt::format("quant_method \"{}\" is not one kvsim models (fp8, mxfp4, "
                            "modelopt FP8/NVFP4, awq, gptq)", echo_text(method)));
  }
}

// The document, or an InputError naming where the parse stopped: a syntax error, or a number
// out of range ("1e400"). nlohmann reports the 1-based offset of the last character it read
// (the end of the offending token).
HfJson hf_parse(const std::string& text, const std::string& source) {
  HfJson j;
  HfDomBuilder builder(j);
  if (!HfJson::sax_parse(text, &builder) || builder.error()) {
    const auto [offset, what] = builder.error().value_or(std::make_pair(size_t{0}, std::string()));
    throw InputError(fmt::format("{}:{}: malformed JSON: {}", source,
                                 hf_line_col(text, offset > 0 ? offset - 1 : 0),
                                 what.empty() ? "unreadable" : hf_json_detail(what)));
  }
  if (!j.is_object()) {
    throw InputError(fmt::format("{}:1:1: expected a config.json object, got {}", source,
                                 j.type_name()));
  }
  return j;
}

// The registered architecture `architectures[0]` names. A config.json says which model class
// loads it as a list of class names; what is wrong with that list is named as such.
const HfArchitecture& hf_architecture(const HfJson& j, const HfReader& r) {
  std::string supported;
  for (const HfArchitecture& a : hf_architectures()) {
    supported += (supported.empty() ? "" : ", ") + std::string(a.name);
  }
  const std::string example = "the model class, e.g. [\"LlamaForCausalLM\"]";
  if (!r.has("architectures")) {
    r.fail("architectures", fmt::format("config.json has no 'architectures' (the list naming {}; "
                                        "supported: {})", example, supported));
  }
  const HfJson& list = j.at("architectures");
  if (list.is_string()) {
    const std::string name = echo_text(list.get_ref<const std::string&>());
    r.fail("architectures", fmt::format("'architectures': expected a list, got the string "
                                        "\"{}\"; write [\"{}\"]", name, name));
  }
  if (!list.is_array()) {
    r.fail("architectures", fmt::format("'architectures': expected a list naming {}, got {}",
                                        example, hf_describe(list)));
  }
  if (list.empty()) {
    r.fail("architectures", fmt::format("'architectures' is an empty list; expected {} "
                                        "(supported: {})", example, supported));
  }
  if (!list[0].is_string()) {
    r.fail("architectures", fmt::format("'architectures'[0]: expected a model class name such as "
                                        "\"LlamaForCausalLM\", got {}", hf_describe(list[0])));
  }
  const std::string& name = list[0].get_ref<const std::string&>();
  for (const HfArchitecture& a : hf_architectures()) {
    if (name == a.name) return a;
  }
  r.fail("architectures", fmt::format("architecture '{}' is not one kvsim can model "
                                      "(supported: {})", echo_text(name), supported));
}

ModelSpec hf_model_spec(const HfJson& j, const std::string& text, const std::string& source) {
  const HfReader r(j, text, source);
  const HfArchitecture* arch = &hf_architecture(j, r);
  const std::string arch_name = arch->name;

  ModelSpec m;
  m.name = source;
  m.display_name = r.string("_name_or_path", fmt::format("{} ({})", arch->family, source));
  m.source = fmt::format("{} ({}, read as {})", source, arch_name, arch->family);
  m.hidden = static_cast<int>(r.integer("hidden_size", 1, 1 << 20));
  m.heads = static_cast<int>(r.integer("num_attention_heads", 1, 4096));
  m.kv_heads = arch->grouped_kv
                   ? static_cast<int>(r.integer("num_key_value_heads", m.heads, 1, 4096))
                   : m.heads;  // GPT-NeoX: multi-head attention, no KV-head key
  if (m.heads % m.kv_heads != 0) {
    r.fail("num_key_value_heads", fmt::format("expected a divisor of num_attention_heads ({}), "
                                              "got {}", m.heads, m.kv_heads));
  }
  if (!r.has("head_dim") && m.hidden % m.heads != 0) {
    r.fail("hidden_size", fmt::format("hidden_size {} is not a multiple of num_attention_heads {} "
                                      "and there is no head_dim", m.hidden, m.heads));
  }
  m.head_dim = static_cast<int>(r.integer("head_dim", m.hidden / m.heads, 1, 4096));
  m.layers = static_cast<int>(r.integer("num_hidden_layers", 1, 1000));
  m.ffn = static_cast<int>(r.integer("intermediate_size", 1, 1 << 22));
  m.vocab = static_cast<int>(r.integer("vocab_size", 1, 1 << 24));
  m.max_position = r.integer("max_position_embeddings", 1, 1'000'000'000);
  m.tied_embeddings = r.boolean("tie_word_embeddings", false);
  m.gated_mlp = arch->gated_mlp;
  m.qkv_bias = arch->qkv_bias || r.boolean("attention_bias", false);
  m.qk_norm = arch->qk_norm;
  if (arch->experts) {
    m.num_experts = static_cast<int>(r.integer("num_local_experts", 1, 4096));
    m.experts_per_token = static_cast<int>(r.integer("num_experts_per_tok", 1, m.num_experts));
  }
  // sliding_window may be null (Mistral v0.2 onwards, Mixtral): full attention. Qwen2 carries a
  // window but applies it only with use_sliding_window.
  if (arch->window && r.has("sliding_window") &&
      (!arch->window_switch || r.boolean("use_sliding_window", false))) {
    m.sliding_window = static_cast<int>(r.integer("sliding_window", 1, 1 << 30));
  }
  m.weight_dtype = m.kv_dtype = hf_dtype(r);
  if (arch->extra == HfExtra::kQwenMoe) read_qwen_moe(j, r, m);
  if (arch->extra == HfExtra::kDeepseekMla) read_deepseek(j, r, m);
  read_quantization(j, r, m);
  return m;
}

}  // namespace

ModelSpec parse_hf_config(const std::string& text, const std::string& source) {
  const HfJson j = hf_parse(text, source);
  try {
    return hf_model_spec(j, text, source);
  } catch (const nlohmann::json::exception& e) {
    // The reads above check each value's type first; should one slip through, it is still the
    // one-line error bad input gets, never an uncaught exception.
    throw InputError(fmt::format("{}:1:1: {}", source, hf_json_detail(e.what())));
  }
}

std::string model_file_problem(const std::filesystem::path& file, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (ec && st.type() != fs::file_type::not_found) {
    if (ec == std::errc::too_many_symbolic_link_levels) {
      return fmt::format("is a symbolic link loop, not {}", what);
    }
    return fmt::format("cannot read the model file: {}", ec.message());
  }
  switch (st.type()) {
    case fs::file_type::regular: return "";
    case fs::file_type::not_found: return fmt::format("no such model file ({})", what);
    case fs::file_type::directory:
      return fs::is_regular_file(file / "config.json", ec)
                 ? "is a folder; name the config.json inside it"
                 : fmt::format("is a folder, not {}", what);
    case fs::file_type::fifo: return fmt::format("is a FIFO (named pipe), not {}", what);
    case fs::file_type::character:
    case fs::file_type::block: return fmt::format("is a device, not {}", what);
    case fs::file_type::socket: return fmt::format("is a socket, not {}", what);
    default: return fmt::format("is not a regular file, not {}", what);
  }
}

ModelSpec read_hf_config(const std::filesystem::path& file) {
  if (const std::string why = model_file_problem(file, "a Hugging Face config.json"); !why.empty()) {
    throw InputError(fmt::format("{}: {}", echo_text(file.string(), 200), why));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read the model config", file.string()));
  std::stringstream text;
  text << in.rdbuf();
  return parse_hf_config(text.str(), file.string());
}

}  // namespace kvsim
