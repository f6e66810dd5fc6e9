#include "models/hf_vision.h"

namespace kvsim {

namespace {

struct VitShape {
  int64_t hidden, ffn, layers, patch, image, channels;
};

// Every key required (Llama 4's configs write them all).
VitShape vit_shape(const HfReader& v) {
  return {.hidden = v.integer("hidden_size", 1, 1 << 16),
          .ffn = v.integer("intermediate_size", 1, 1 << 20),
          .layers = v.integer("num_hidden_layers", 1, 1000),
          .patch = v.integer("patch_size", 1, 4096),
          .image = v.integer("image_size", 1, 1 << 16),
          .channels = v.integer("num_channels", 3, 1, 64)};
}

// A key left out takes transformers' SiglipVisionConfig default, as loading the config does.
VitShape siglip_shape(const HfReader& v) {
  return {.hidden = v.integer("hidden_size", 768, 1, 1 << 16),
          .ffn = v.integer("intermediate_size", 3072, 1, 1 << 20),
          .layers = v.integer("num_hidden_layers", 12, 1, 1000),
          .patch = v.integer("patch_size", 16, 1, 4096),
          .image = v.integer("image_size", 224, 1, 1 << 16),
          .channels = v.integer("num_channels", 3, 1, 64)};
}

// One encoder layer: q, k, v, out (h x h with biases), fc1 and fc2 (with biases), two
// LayerNorms (weight and bias).
int64_t vit_layer_params(const VitShape& s) {
  const int64_t h = s.hidden, f = s.ffn;
  return 4 * (h * h + h) + (h * f + f) + (f * h + h) + 2 * 2 * h;
}

int64_t patches(const VitShape& s) {
  const int64_t side = s.image / s.patch;
  return side * side;
}

}  // namespace

int64_t gemma3_vision_params(const HfReader& v, int64_t text_hidden) {
  const VitShape s = siglip_shape(v);
  const int64_t h = s.hidden;
  const int64_t embeddings = (s.channels * s.patch * s.patch * h + h) + patches(s) * h;
  const int64_t encoder = s.layers * vit_layer_params(s) + 2 * h;  // + post_layernorm
  const int64_t projector = h * text_hidden + h;  // mm_input_projection, mm_soft_emb_norm
  return embeddings + encoder + projector;
}

int64_t llama4_vision_params(const HfReader& v, int64_t text_hidden) {
  const VitShape s = vit_shape(v);
  const int64_t h = s.hidden;
  const int64_t embeddings = s.channels * s.patch * s.patch * h  // unfold + linear, no bias
                             + h                                 // class_embedding
                             + (patches(s) + 1) * h;             // positional_embedding_vlm
  const int64_t norms = 2 * 2 * h;                               // layernorm_pre, layernorm_post
  const int64_t in = v.integer("projector_input_dim", 1, 1 << 20);
  const int64_t out = v.integer("projector_output_dim", 1, 1 << 20);
  const int64_t adapter = s.ffn * in + out * out;  // Llama4VisionMLP2's fc1, fc2
  const int64_t projector = v.integer("vision_output_dim", 1, 1 << 20) * text_hidden;
  return embeddings + norms + s.layers * vit_layer_params(s) + adapter + projector;
}

}  // namespace kvsim
