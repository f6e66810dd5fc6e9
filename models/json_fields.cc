#include "models/json_fields.h"

namespace kvsim {

nlohmann::ordered_json to_json(const KvRow& r) {
  nlohmann::ordered_json o;
  o["seq_len"] = r.seq_len;
  o["batch"] = r.batch;
  o["kv_bytes_per_request"] = r.kv_bytes_per_request;
  o["kv_bytes_total"] = r.kv_bytes_total;
  o["remaining_bytes"] = or_null(r.remaining_bytes);
  o["risk"] = std::string(risk_name(r.risk));
  return o;
}

nlohmann::ordered_json to_json(const OpCost& o) {
  nlohmann::ordered_json j;
  j["name"] = std::string(o.name);
  j["class"] = std::string(op_class_name(o.op_class));
  j["flops"] = o.flops;
  j["bytes"] = o.bytes;
  j["compute_s"] = o.compute_s;
  j["memory_s"] = o.memory_s;
  j["overhead_s"] = o.overhead_s;
  j["seconds"] = o.seconds;
  j["bound"] = std::string(bound_name(o.bound));
  if (o.comm.source != CommSource::kNone) {
    // A collective: how vLLM runs it and where its time came from (docs/latency.md).
    nlohmann::ordered_json c;
    if (o.name == "allreduce") c["path"] = std::string(path_name(o.comm.path));
    c["cuda_graph"] = o.comm.graph;
    c["source"] = std::string(comm_source_name(o.comm.source));
    c["message_bytes"] = o.comm.message_bytes;
    c["calls"] = o.comm.calls;
    j["collective"] = c;
  }
  return j;
}

nlohmann::ordered_json to_json(const SequenceLatency& s, bool with_ops) {
  nlohmann::ordered_json o;
  o["seq_len"] = s.seq_len;
  o["batch"] = s.batch;
  o["prefill_s"] = s.prefill_s;
  o["prefill_lower_bound_s"] = s.prefill_lower_bound_s;
  o["ttft_s"] = s.ttft_s;
  o["ttft_lower_bound_s"] = s.ttft_lower_bound_s;
  o["decode_step_s"] = s.decode_step_s;
  o["decode_step_lower_bound_s"] = s.decode_step_lower_bound_s;
  o["decode_tokens_per_s"] = s.decode_tokens_per_s;
  o["decode_tokens_per_s_upper_bound"] = s.decode_tokens_per_s_upper_bound;
  o["prefill_flops"] = s.prefill.flops;
  o["prefill_bytes"] = s.prefill.bytes;
  o["decode_flops"] = s.decode.flops;
  o["decode_bytes"] = s.decode.bytes;
  if (with_ops) {
    o["prefill_ops"] = to_json_array(s.prefill.ops);
    o["prefill_bound_ops"] = to_json_array(s.prefill_bound.ops);
    o["decode_ops"] = to_json_array(s.decode.ops);
    o["decode_bound_ops"] = to_json_array(s.decode_bound.ops);
  }
  return o;
}

nlohmann::ordered_json to_json(const ClaimCheck& r, int kv_heads) {
  const Claim& c = r.claim;
  nlohmann::ordered_json j;
  j["line"] = c.line;
  j["label"] = c.label;
  j["model"] = c.model;
  j["gpu"] = c.gpu;
  j["attention"] = std::string(attention_kind_name(c.attention));
  j["kv_heads"] = kv_heads;
  j["block_size"] = c.block_tokens;
  j["seq_len"] = c.seq_len;
  j["batch"] = c.batch;
  j["metric"] = c.metric;
  j["unit"] = c.throughput ? "tokens/s" : "s";
  j["claimed"] = c.claimed;
  j["lower_bound"] = r.lower_bound;
  j["estimate"] = r.estimate;
  j["bound_fraction"] = r.bound_fraction;
  j["verdict"] = std::string(verdict_name(r.verdict));
  j["flops"] = r.flops;
  j["bytes"] = r.bytes;
  j["compute_floor_s"] = r.compute_floor_s;
  j["memory_floor_s"] = r.memory_floor_s;
  j["implied_flops_per_s"] = r.implied_flops_per_s;
  return j;
}

nlohmann::ordered_json to_json(const ModelSpec& m) {
  nlohmann::ordered_json o;
  o["name"] = m.name;
  o["display_name"] = m.display_name;
  o["layers"] = m.layers;
  o["heads"] = m.heads;
  o["kv_heads"] = m.kv_heads;
  o["head_dim"] = m.head_dim;
  o["hidden"] = m.hidden;
  o["ffn"] = m.ffn;
  o["vocab"] = m.vocab;
  o["num_experts"] = m.num_experts;
  o["experts_per_token"] = m.experts_per_token;
  o["max_position"] = m.max_position;
  o["attention"] = m.attention_kind();
  o["params"] = m.param_count();
  o["active_params"] = m.active_param_count();
  o["weight_dtype"] = std::string(dtype_name(m.weight_dtype));
  o["kv_dtype"] = std::string(dtype_name(m.kv_dtype));
  o["weights_bytes"] = m.weights_bytes();
  o["kv_bytes_per_token"] = m.kv_bytes_per_token();
  o["source"] = m.source;
  return o;
}

nlohmann::ordered_json to_json(const GpuSpec& g) {
  nlohmann::ordered_json o;
  o["name"] = g.name;
  o["display_name"] = g.display_name;
  o["marketed_gb"] = g.marketed_gb;
  o["memory_bytes"] = g.memory_bytes;
  o["context_reserve_bytes"] = g.context_reserve_bytes;
  o["hbm_bytes_per_s"] = g.hbm_bytes_per_s;
  o["fp16_flops"] = g.fp16_flops;
  o["fp8_flops"] = g.fp8_flops;
  o["fp4_flops"] = g.fp4_flops;
  o["compute_capability"] = g.compute_capability;
  o["sm_count"] = g.sm_count;
  o["l2_bytes"] = g.l2_bytes;
  o["pcie_bytes_per_s"] = g.pcie_bytes_per_s;
  o["nvlink_bytes_per_s"] = g.nvlink_bytes_per_s;
  o["source"] = g.source;
  o["gpu_hour_usd"] = g.gpu_hour_usd;  // capacity search prices (docs/capacity.md)
  o["price_source"] = g.price_source;
  return o;
}

nlohmann::ordered_json pick(const nlohmann::ordered_json& j,
                            std::initializer_list<const char*> keys) {
  nlohmann::ordered_json out;
  for (const char* k : keys) out[k] = j.at(k);
  return out;
}

}  // namespace kvsim
