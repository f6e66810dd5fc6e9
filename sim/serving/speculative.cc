#include "sim/serving/speculative.h"

#include <algorithm>

#include "core/check.h"

namespace kvsim {

namespace {

// The drafter of EAGLE, EAGLE-3 and MTP as the latency model sees it: one decoder layer of the
// target's width. An EAGLE head is a dense Llama-style layer (vLLM's llama_eagle.py /
// llama_eagle3.py); DeepSeek's MTP module is one MoE layer (deepseek_mtp.py); both read the
// target's embedding and LM head, which the pass's costing counts once per pass. Full attention:
// the draft layer has no window.
ModelSpec one_layer_drafter(const ModelSpec& target, SpeculativeConfig::Method method) {
  ModelSpec d = target;
  d.name = target.name + "-drafter";
  d.layers = 1;
  d.mtp_layers = 0;
  d.local_attention.reset();
  d.sliding_window.reset();
  d.dense_layers.clear();
  if (method != SpeculativeConfig::Method::kMtp && target.moe()) d.dense_layers = {0};
  return d;
}

}  // namespace

ModelSpec model_with_draft_model(const ModelSpec& target, const ModelSpec& draft,
                                 const Parallelism& par) {
  ModelSpec m = target;
  // Weights: each GPU holds its share of both checkpoints (gpu_share divides the override by the
  // GPUs, so it is written as the per-GPU sum times the GPUs).
  const Parallelism draft_par{.tensor = par.tensor};  // dense or not, no experts split over DP
  m.weights_bytes_override =
      (weights_bytes_on_gpu(target, par, 0) + weights_bytes_on_gpu(draft, draft_par, 0)) *
      par.gpus();
  // KV: the draft model's bytes per token as whole target layers (rounded up), appended after
  // the target's like the EAGLE layer, so every block holds both models' layers.
  const int64_t per_layer = target.kv_bytes_per_token() / target.layers;
  const int64_t draft_kv = draft.kv_bytes_per_token();
  const int extra = static_cast<int>((draft_kv + per_layer - 1) / per_layer);
  for (int i = 0; i < extra; ++i) {
    const int index = m.layers++;
    if (m.moe()) m.dense_layers.push_back(index);
  }
  return m;
}

ModelSpec model_with_drafter(const ModelSpec& target, const SpeculativeConfig& config,
                             const Parallelism& par) {
  if (config.method == SpeculativeConfig::Method::kDraftModel) {
    return model_with_draft_model(target, *config.draft_model, par);
  }
  if (!config.one_layer_drafter() || par.pipeline > 1) return target;
  ModelSpec m = target;
  const int extra = m.layers++;  // its index: after the target's, outside every local group
  if (m.moe() && config.method != SpeculativeConfig::Method::kMtp) m.dense_layers.push_back(extra);
  return m;
}

Speculator::Speculator(const SpeculativeConfig& config, const LatencyModel& target)
    : config_(config) {
  Parallelism par = target.parallelism();
  par.pipeline = 1;  // one layer is one stage; a draft model runs whole on the last stage
  if (config_.method == SpeculativeConfig::Method::kDraftModel) {
    // vLLM shards the draft model with the target's tensor parallelism (draft_tensor_parallel_size
    // defaults to it) and runs it with the target's attention backend.
    draft_ = std::make_unique<LatencyModel>(*config_.draft_model, target.gpu(), target.profile(),
                                            target.attention(), Parallelism{.tensor = par.tensor});
    draft_->set_collective_settings(target.collective_settings());
    return;
  }
  if (!config_.one_layer_drafter()) return;
  draft_ = std::make_unique<LatencyModel>(one_layer_drafter(target.model(), config_.method),
                                          target.gpu(), target.profile(), target.attention(), par);
  draft_->set_collective_settings(target.collective_settings());
}

void Speculator::verification_shape(const IterationPlan& it, const ModelSpec& model,
                                    BatchShape& shape, std::vector<BatchChunk>& chunks) const {
  int64_t plain = 0, plain_context = 0;
  for (const RequestState* r : it.decode) {
    const int64_t d = r->spec_drafts;
    const int64_t context = r->context_tokens();
    if (d == 0) {
      ++plain;
      plain_context += model.attended_tokens(context);
      continue;
    }
    // The last sampled token and the d drafts are new; the KV before them is computed.
    shape.prefill.push_back({.tokens = 1 + d, .context_tokens = context - 1, .emits_token = true});
    chunks.push_back({.query_tokens = 1 + d, .context_tokens = context + d});
  }
  for (const IterationPlan::Finished& f : it.finished_in_flight) {
    if (f.tokens == 1) {
      ++plain;
      plain_context += model.attended_tokens(f.kv_before + 1);
      continue;
    }
    shape.prefill.push_back(
        {.tokens = f.tokens, .context_tokens = f.kv_before, .emits_token = true});
    chunks.push_back({.query_tokens = f.tokens, .context_tokens = f.kv_before + f.tokens});
  }
  shape.decode_seqs = plain;
  shape.decode_context_tokens = plain_context;
}

double Speculator::draft_seconds(const BatchShape& shape) const {
  if (draft_ == nullptr) return 0;
  const int k = config_.num_speculative_tokens;
  // Pass 1: the drafter over the step's tokens, as the target ran them.
  double s = draft_->iteration(shape, OpDetail::kTotals).ops_seconds;
  if (k == 1) return s;
  // Passes 2..k: one row per sampling sequence, each a token further along.
  int64_t rows = shape.decode_seqs, context = shape.decode_context_tokens;
  for (const PrefillChunk& c : shape.prefill) {
    if (!c.emits_token) continue;
    ++rows;
    context += c.context_tokens + c.tokens;
  }
  if (rows == 0) return s;
  for (int i = 1; i < k; ++i) {
    BatchShape pass;
    pass.block_tokens = shape.block_tokens;
    pass.decode_seqs = rows;
    pass.decode_context_tokens = context + i * rows;
    s += draft_->iteration(pass, OpDetail::kTotals).ops_seconds;
  }
  return s;
}

void Speculator::begin_step_end(std::unordered_map<int64_t, RequestState>& requests) {
  for (const int64_t id : gained_) {
    if (auto f = requests.find(id); f != requests.end()) {
      f->second.spec_last_gain = 0;
      f->second.spec_last_drafts = 0;
    }
  }
  gained_.clear();
}

void Speculator::prefill_gained(RequestState& r) {
  r.spec_last_gain = 1;
  r.spec_last_drafts = 0;
  gained_.push_back(r.spec.id);
}

int64_t Speculator::tokens_gained(RequestState& r, Recorder& recorder) {
  const int64_t d = r.spec_drafts;
  const int64_t a =
      d > 0 ? accepted_drafts(config_, r.spec.id, r.generated, d, r.spec.acceptance_rate()) : 0;
  if (d > 0) recorder.on_draft(d, a);
  const int64_t left = r.spec.output_tokens - r.generated;
  KVSIM_CHECK(left >= 1, "request {} decoded past its {} output tokens", r.spec.id,
              r.spec.output_tokens);
  const int64_t gained = std::min(1 + a, left);
  recorder.on_decode_tokens(gained);
  r.spec_last_gain = static_cast<int16_t>(gained);
  r.spec_last_drafts = static_cast<int16_t>(d);
  gained_.push_back(r.spec.id);
  return gained;
}

}  // namespace kvsim
