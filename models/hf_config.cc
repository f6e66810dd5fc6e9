#include "models/hf_config.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/echo_text.h"
#include "core/errors.h"
#include "models/hf_families.h"
#include "models/hf_json.h"
#include "models/hf_vision.h"

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
      {"Qwen2MoeForCausalLM", "Qwen2-MoE", true, true, true, false, true, true, false,
       HfExtra::kQwenMoe},
      {"Qwen3MoeForCausalLM", "Qwen3-MoE", true, false, true, false, true, true, true,
       HfExtra::kQwenMoe},
      {"DeepseekV2ForCausalLM", "DeepSeek-V2", false, false, true, false, false, false, false,
       HfExtra::kDeepseekMla},
      {"DeepseekV3ForCausalLM", "DeepSeek-V3", false, false, true, false, false, false, false,
       HfExtra::kDeepseekMla},
      {"GptOssForCausalLM", "gpt-oss", true, false, true, true, false, false, false,
       HfExtra::kGptOss},
      {"Gemma3ForCausalLM", "Gemma 3", true, false, true, false, false, false, true,
       HfExtra::kGemma3},
      {"Gemma3ForConditionalGeneration", "Gemma 3 (text_config)", true, false, true, false, false,
       false, true, HfExtra::kGemma3, true},
      {"Llama4ForConditionalGeneration", "Llama 4 (text_config)", true, false, true, true, false,
       false, false, HfExtra::kLlama4, true},
      {"PhiMoEForCausalLM", "Phi-3.5-MoE", true, false, true, true, false, true, false,
       HfExtra::kPhiMoe},
  };
  return table;
}

namespace {

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
                                        "supported: {})",
                                        example, supported));
  }
  const HfJson& list = j.at("architectures");
  if (list.is_string()) {
    const std::string name = echo_text(list.get_ref<const std::string&>());
    r.fail("architectures", fmt::format("'architectures': expected a list, got the string "
                                        "\"{}\"; write [\"{}\"]",
                                        name, name));
  }
  if (!list.is_array()) {
    r.fail("architectures", fmt::format("'architectures': expected a list naming {}, got {}",
                                        example, hf_describe(list)));
  }
  if (list.empty()) {
    r.fail("architectures", fmt::format("'architectures' is an empty list; expected {} "
                                        "(supported: {})",
                                        example, supported));
  }
  if (!list[0].is_string()) {
    r.fail("architectures", fmt::format("'architectures'[0]: expected a model class name such as "
                                        "\"LlamaForCausalLM\", got {}",
                                        hf_describe(list[0])));
  }
  const std::string& name = list[0].get_ref<const std::string&>();
  for (const HfArchitecture& a : hf_architectures()) {
    if (name == a.name) return a;
  }
  r.fail("architectures", fmt::format("architecture '{}' is not one kvsim can model "
                                      "(supported: {})",
                                      echo_text(name), supported));
}

// A multimodal checkpoint's vision tower and projector, which vLLM loads beside the language
// model (kept in 16-bit: the checkpoints' quantization leaves them out).
void read_vision_tower(const HfJson& j, const std::string& text, const std::string& source,
                       const HfArchitecture& arch, ModelSpec& m) {
  if (!arch.text_config || !j.contains("vision_config") || !j.at("vision_config").is_object()) {
    return;
  }
  const HfReader v(j.at("vision_config"), text, source);
  if (arch.extra == HfExtra::kGemma3) m.vision_params = gemma3_vision_params(v, m.hidden);
  if (arch.extra == HfExtra::kLlama4) m.vision_params = llama4_vision_params(v, m.hidden);
}

ModelSpec hf_model_spec(const HfJson& j, const std::string& text, const std::string& source) {
  const HfReader top(j, text, source);
  const HfArchitecture* arch = &hf_architecture(j, top);
  const std::string arch_name = arch->name;
  // A multimodal checkpoint keeps the language model's keys in text_config (vLLM reads it through
  // get_hf_text_config); torch_dtype and quantization_config stay at the top level.
  if (arch->text_config && (!j.contains("text_config") || !j.at("text_config").is_object())) {
    top.fail("text_config", fmt::format("{} keeps its language model in 'text_config' (an "
                                        "object); config.json has none",
                                        arch_name));
  }
  const HfReader r = arch->text_config ? HfReader(j.at("text_config"), text, source) : top;
  // Gemma 3's text_config leaves out keys whose Gemma3TextConfig defaults it relies on.
  const bool gemma = arch->extra == HfExtra::kGemma3;

  ModelSpec m;
  m.name = source;
  m.display_name = top.string("_name_or_path", fmt::format("{} ({})", arch->family, source));
  m.source = fmt::format("{} ({}, read as {})", source, arch_name, arch->family);
  m.hidden = static_cast<int>(r.integer("hidden_size", 1, 1 << 20));
  m.heads = static_cast<int>(r.integer("num_attention_heads", 1, 4096));
  m.kv_heads = arch->grouped_kv
                   ? static_cast<int>(r.integer("num_key_value_heads", m.heads, 1, 4096))
                   : m.heads;  // GPT-NeoX: multi-head attention, no KV-head key
  if (m.heads % m.kv_heads != 0) {
    r.fail("num_key_value_heads", fmt::format("expected a divisor of num_attention_heads ({}), "
                                              "got {}",
                                              m.heads, m.kv_heads));
  }
  if (!r.has("head_dim") && m.hidden % m.heads != 0) {
    r.fail("hidden_size", fmt::format("hidden_size {} is not a multiple of num_attention_heads {} "
                                      "and there is no head_dim",
                                      m.hidden, m.heads));
  }
  m.head_dim = static_cast<int>(r.integer("head_dim", gemma ? 256 : m.hidden / m.heads, 1, 4096));
  m.layers = static_cast<int>(r.integer("num_hidden_layers", 1, 1000));
  m.ffn = static_cast<int>(r.integer("intermediate_size", 1, 1 << 22));
  m.vocab = static_cast<int>(gemma ? r.integer("vocab_size", 262208, 1, 1 << 24)
                                   : r.integer("vocab_size", 1, 1 << 24));
  m.max_position = gemma ? r.integer("max_position_embeddings", 131072, 1, 1'000'000'000)
                         : r.integer("max_position_embeddings", 1, 1'000'000'000);
  m.tied_embeddings = r.boolean("tie_word_embeddings", false);
  m.gated_mlp = arch->gated_mlp;
  m.qkv_bias = arch->qkv_bias || r.boolean("attention_bias", false);
  m.qk_norm = arch->qk_norm;
  if (arch->experts) {
    m.num_experts = static_cast<int>(r.integer("num_local_experts", 1, 4096));
    m.experts_per_token = static_cast<int>(r.integer("num_experts_per_tok", 1, m.num_experts));
  }
  // sliding_window may be null (Mistral v0.2 onwards, Mixtral): full attention. Qwen2 and Qwen3
  // carry a window but apply it only with use_sliding_window, on the layers from
  // max_window_layers.
  if (arch->window_switch) {
    read_qwen_windows(r, m);
  } else if (arch->window && r.has("sliding_window")) {
    m.sliding_window = static_cast<int>(r.integer("sliding_window", 1, 1 << 30));
  }
  m.weight_dtype = m.kv_dtype = hf_dtype(r, top);
  switch (arch->extra) {
    case HfExtra::kNone: break;
    case HfExtra::kQwenMoe: read_qwen_moe(r, m); break;
    case HfExtra::kDeepseekMla: read_deepseek(r, m); break;
    case HfExtra::kGptOss: read_gpt_oss(r, m); break;
    case HfExtra::kGemma3: read_gemma3(r, m); break;
    case HfExtra::kLlama4: read_llama4(r, m); break;
    case HfExtra::kPhiMoe: read_phimoe(r, m); break;
  }
  read_quantization(top, m);
  read_vision_tower(j, text, source, *arch, m);
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
  if (const std::string why = model_file_problem(file, "a Hugging Face config.json");
      !why.empty()) {
    throw InputError(fmt::format("{}: {}", echo_text(file.string(), 200), why));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read the model config", file.string()));
  std::stringstream text;
  text << in.rdbuf();
  return parse_hf_config(text.str(), file.string());
}

}  // namespace kvsim
