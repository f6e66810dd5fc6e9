// The vision tower and projector of a multimodal Hugging Face checkpoint, counted from its
// config.json's vision_config: Gemma 3's SigLIP encoder and Llama 4's vision model. vLLM loads
// them with the language model (Gemma3ForConditionalGeneration in gemma3_mm.py,
// Llama4ForConditionalGeneration in mllama4.py) unless the image limit is 0.
#pragma once

#include <cstdint>

#include "models/hf_json.h"

namespace kvsim {

// Parameters of the SigLIP vision tower (Gemma 3): a patch convolution with bias, a learned
// position per patch, `num_hidden_layers` pre-norm layers (q, k, v, out with biases, two
// LayerNorms, fc1 and fc2 with biases) and a post LayerNorm; then Gemma 3's projector, the
// vision-to-text matrix and an RMSNorm of the vision width.
int64_t gemma3_vision_params(const HfReader& vision, int64_t text_hidden);

// Parameters of Llama 4's vision model: an unfolded patch projection (no bias), a class token
// and a learned position per patch and for it, pre and post LayerNorms, `num_hidden_layers`
// layers (q, k, v, o, fc1, fc2 with biases, two LayerNorms), the pixel-shuffle adapter
// (intermediate -> projector_input_dim -> projector_output_dim, no biases) and the projector
// vision_output_dim -> the text width (no bias).
int64_t llama4_vision_params(const HfReader& vision, int64_t text_hidden);

}  // namespace kvsim
