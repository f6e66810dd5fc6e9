#include "sim/serving/host_path.h"

#include <cctype>
#include <vector>

#include <fmt/format.h>

#include "core/config_node.h"

namespace kvsim {

namespace {

// "0.6.1.post1" -> {0, 6, 1}; nullopt unless it starts with two or three dot-separated numbers
// (a fourth part, or a suffix after '-', '+' or a letter, is a build tag: ignored).
std::optional<std::vector<int>> version_numbers(const std::string& s) {
  std::vector<int> parts;
  size_t i = 0;
  while (i < s.size() && parts.size() < 3) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return std::nullopt;
    int v = 0;
    size_t digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      if (++digits > 6) return std::nullopt;
      v = v * 10 + (s[i++] - '0');
    }
    parts.push_back(v);
    if (i == s.size() || s[i] != '.') break;
    ++i;  // the dot
  }
  if (parts.size() < 2 || s.back() == '.') return std::nullopt;  // "0", "0.6."
  if (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) return std::nullopt;
  return parts;
}

}  // namespace

std::optional<VllmVersion> parse_vllm_version(const ConfigNode& engine) {
  const std::optional<ConfigNode> node = engine.optional_child("vllm_version");
  if (!node || node->is_null()) return std::nullopt;
  if (!node->is_scalar()) node->fail_expected("a vLLM version string such as \"0.6.0\"");
  const std::string text = node->as<std::string>();
  const auto parts = version_numbers(text);
  if (!parts) node->fail_expected("a vLLM version such as \"0.6.0\" or \"0.19.0\"");
  VllmVersion v{.major = (*parts)[0],
                .minor = (*parts)[1],
                .patch = parts->size() > 2 ? (*parts)[2] : 0,
                .text = text};
  if (v.major == 0 && v.minor < 6) {
    node->fail(fmt::format(
        "vLLM {} is a V0 engine without async output processing (it came with 0.6.0), whose "
        "host path is not modelled; give 0.6.0 or later",
        text));
  }
  return v;
}

HostPath host_path_of(const std::optional<VllmVersion>& version) {
  if (!version) return HostPath::kV1FrontEnd;
  return version->major == 0 && version->minor < 8 ? HostPath::kV0AsyncOutput
                                                   : HostPath::kV1FrontEnd;
}

double v0_output_processing_s(int64_t seqs) {
  // Through (1, 0.2 ms) and (32, 3.4 ms): slope 3.2 / 31 ms per sequence.
  constexpr double kPerSeqS = 3.2e-3 / 31.0;
  constexpr double kFixedS = 0.2e-3 - kPerSeqS;
  return seqs > 0 ? kFixedS + kPerSeqS * static_cast<double>(seqs) : 0.0;
}

}  // namespace kvsim
