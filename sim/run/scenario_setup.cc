// prepare_scenario(): everything a run sets up before its first event (sim/run/scenario_runner.h),
// and the scenario hash.
#include <map>
#include <memory>

#include <fmt/format.h>

#include "core/errors.h"
#include "core/fnv1a.h"
#include "models/catalog.h"
#include "models/latency/profile.h"
#include "models/memory/kv_groups.h"
#include "models/memory/kv_startup_check.h"
#include "models/parallelism.h"
#include "sim/cluster/cluster_config.h"
#include "sim/run/prepared_policy.h"
#include "sim/run/scenario_runner.h"
#include "sim/serving/speculative.h"

namespace kvsim {

namespace {

// A policy's engine: the scenario's `engine:` with the policy's own `engine:` keys on top.
// Both are read through the merged map only (peek), so it, not the originals, gets its keys
// checked; each key keeps the position and path where it was written.
// A cluster's replica group's `engine:` (`group`) goes on top of both: the group is the
// hardware (tensor_parallel on its GPUs), the same whatever the policy.
ConfigNode policy_engine(const ConfigNode& root, const ConfigNode& policy,
                         const std::optional<ConfigNode>& group = std::nullopt) {
  policy.allow({"engine"});  // read here, through the merged map
  std::vector<ConfigNode> layers;
  if (auto base = root.peek("engine")) {
    if (!base->is_map() && !base->is_null()) base->fail_expected("a map of engine settings");
    layers.push_back(*base);
  }
  if (auto over = policy.peek("engine")) {
    if (!over->is_map()) over->fail_expected("a map of engine settings");
    layers.push_back(*over);
  }
  if (group) layers.push_back(*group);
  return ConfigNode::merge(layers, policy);
}

// Policy names label the rows of requests.csv and the summaries, so they must differ. Checks
// policies[i]'s name against those before it (`seen`: name -> the first one's node).
void check_unique_name(const ConfigNode& policy, std::map<std::string, ConfigNode>& seen) {
  const ConfigNode name = policy.child("name");
  const std::string text = name.as<std::string>();
  if (auto it = seen.find(text); it != seen.end()) {
    name.fail(
        fmt::format("duplicate policy name '{}' (first at line {})", text, it->second.line()));
  }
  seen.emplace(text, name);
}

}  // namespace

PreparedScenario::PreparedScenario() = default;
PreparedScenario::PreparedScenario(PreparedScenario&&) noexcept = default;
PreparedScenario& PreparedScenario::operator=(PreparedScenario&&) noexcept = default;
PreparedScenario::~PreparedScenario() = default;

namespace {

// speculative_config's `model:` for method draft_model, resolved as the scenario's `model:` (a
// catalog name or a model file beside the scenario), with the engine's dtypes. vLLM verifies the
// drafts against the target's distribution token by token, so the two vocabularies must match;
// a draft model under pipeline parallelism (it runs on the last stage) is not modelled.
void resolve_draft_model(EngineConfig& engine, const ConfigNode& engine_node,
                         const ModelSpec& target, const Catalog& catalog) {
  const ConfigNode node = engine_node.child("speculative_config").child("model");
  ModelSpec draft = resolve_model(node, catalog);
  if (draft.vocab != target.vocab) {
    node.fail(
        fmt::format("draft model {} has a vocabulary of {} tokens, the target {} has {}: "
                    "vLLM verifies drafts against the target's tokens, so they must match",
                    draft.name, draft.vocab, target.name, target.vocab));
  }
  if (engine.pipeline_parallel > 1) {
    node.fail("a draft model under pipeline_parallel > 1 is not modelled");
  }
  if (engine.weights_dtype) draft.weight_dtype = *engine.weights_dtype;
  if (engine.kv_cache_dtype) draft.kv_dtype = *engine.kv_cache_dtype;
  try {
    check_parallelism(draft, Parallelism{engine.tensor_parallel, 1, 1, false});
  } catch (const InputError& e) {
    node.fail(fmt::format("draft model under the target's tensor_parallel {}: {}",
                          engine.tensor_parallel, e.what()));
  }
  engine.speculative->draft_model = std::move(draft);
}

// method: mtp drafts with the target's own multi-token-prediction layers, which vLLM loads as
// the drafter (deepseek_mtp.py, from num_nextn_predict_layers; SpeculativeConfig reads n_predict
// from it): a model without them has nothing to draft with.
void check_mtp_layers(const EngineConfig& engine, const ConfigNode& engine_node,
                      const ModelSpec& target) {
  if (!engine.speculative || engine.speculative->method != SpeculativeConfig::Method::kMtp ||
      target.mtp_layers > 0) {
    return;
  }
  engine_node.child("speculative_config")
      .child("method")
      .fail(fmt::format(
          "method mtp drafts with the model's own multi-token-prediction layers and {} has none "
          "(mtp_layers 0; a config.json gives them as num_nextn_predict_layers, DeepSeek-V3 has "
          "1): "
          "vLLM has no MTP module to load; use eagle, eagle3, ngram or draft_model",
          target.name));
}

// vLLM refuses to start when its paged pool cannot hold one request of max_model_len
// (models/memory/kv_startup_check.h). Checked where vLLM checks it, on the memory its profile run
// leaves for KV (gpu_memory_utilization); a `num_blocks` pool is the modeller's own (as the
// conformance cases' small pools), so it is not checked. The contiguous and caching-allocator
// stores model servers without such a check: they start and fail at the request.
// The KV cache groups of one GPU's share as a paged pool holds them.
KvGroupLayout paged_layout(const ModelSpec& share, const ConfigNode& kv_node) {
  KvGroupLayout layout = kv_group_layout(share);
  if (share.hybrid() && kv_node.get<bool>("disable_hybrid_kv_cache_manager", false)) {
    // vLLM's unify_hybrid_kv_cache_specs: every layer a full-attention one.
    std::vector<int> all(share.layers);
    for (int i = 0; i < share.layers; ++i) all[i] = i;
    layout.groups = {KvGroup{KvGroup::Kind::kFull, 0, std::move(all)}};
    layout.group_size = share.layers;
  }
  return layout;
}

KvRequestLimits request_limits(const ConfigNode& kv_node, const EngineConfig& engine) {
  return {.block_tokens = kv_node.get<int64_t>("block_size", 16),
          .max_model_len = engine.max_model_len,
          .max_num_batched_tokens = engine.max_num_batched_tokens};
}

void check_one_request_fits(const GpuMemoryPool& pool, const ConfigNode& kv_node,
                            const ConfigNode& engine_node, const EngineConfig& engine) {
  if (kv_node.get<std::string>("type") != "paged" || kv_node.has("num_blocks")) return;
  const KvGroupLayout layout = paged_layout(pool.model(), kv_node);
  const int64_t available = kv_bytes_from_utilization(kv_node, pool.budget(), "paged KV pool");
  if (auto error = one_request_fits_error(layout, request_limits(kv_node, engine), available)) {
    if (auto len = engine_node.peek("max_model_len")) len->fail(*error);
    if (engine_node.peek("kv")) kv_node.fail(*error);
    engine_node.fail(*error);  // the model's own max_position on the default pool
  }
}

// The pool's KV tokens per GPU as vLLM logs them ("GPU KV cache size"): for a hybrid paged pool
// its blocks (the null block included) times max_model_len over one such request's blocks
// (kv_startup_check.h); otherwise every token slot of the pool.
int64_t pool_tokens_per_gpu(const GpuMemoryPool& pool, const ConfigNode& kv_node,
                            const EngineConfig& engine) {
  const ModelSpec& share = pool.model();
  const int64_t capacity = pool.kv().usage().capacity_bytes;
  if (kv_node.get<std::string>("type") != "paged" || !share.hybrid() ||
      kv_node.get<bool>("disable_hybrid_kv_cache_manager", false)) {
    return capacity / share.kv_bytes_per_token();
  }
  const KvGroupLayout layout = paged_layout(share, kv_node);
  const KvRequestLimits limits = request_limits(kv_node, engine);
  const int64_t blocks = capacity / layout.block_bytes(limits.block_tokens) + 1;
  return vllm_kv_cache_size_tokens(layout, limits, blocks);
}

// The replica's memory pool. With speculative decoding it also holds the drafter's layer or the
// draft model (model_with_drafter). Its errors name the place that sizes it: the engine's kv,
// the draft model, or (no engine.kv) the engine or policy, with the default pool's key to set.
std::unique_ptr<GpuMemoryPool> make_replica_pool(const ModelSpec& model, const GpuSpec& gpu,
                                                 const ConfigNode& kv_node,
                                                 const ConfigNode& engine_node,
                                                 const EngineConfig& engine,
                                                 const Parallelism& parallelism) {
  try {
    return std::make_unique<GpuMemoryPool>(
        engine.speculative ? model_with_drafter(model, *engine.speculative, parallelism) : model,
        gpu, kv_node,
        PoolOptions{.workspace_bytes = engine.workspace_bytes,
                    .attention = engine.attention,
                    .profile_batched_tokens = engine.max_num_batched_tokens,
                    .profile_num_seqs = engine.max_num_seqs,
                    .parallelism = parallelism});
  } catch (const InputError& e) {
    // The error without the kv node's place (the default node's is "default kv:1:1").
    std::string why = e.what();
    if (const std::string at = kv_node.where() + ": "; why.rfind(at, 0) == 0) {
      why = why.substr(at.size());
    }
    if (engine.speculative && engine.speculative->draft_model) {
      // A target that fits alone but not beside its draft model: the error at the draft model.
      engine_node.child("speculative_config")
          .child("model")
          .fail(fmt::format("with draft model {} beside {}: {}",
                            engine.speculative->draft_model->name, model.name, why));
    }
    if (engine_node.peek("kv")) throw;
    // No engine.kv: the pool is vLLM's default, sized by gpu_memory_utilization 0.9, which has
    // no place in the file; the error names the engine (or the policy) and the key to set.
    if (why.find("gpu_memory_utilization") == std::string::npos) engine_node.fail(why);
    engine_node.fail(
        fmt::format("{} (the default kv: {{type: paged, gpu_memory_utilization: "
                    "0.9}}; set engine.kv.gpu_memory_utilization or "
                    "engine.kv.num_blocks)",
                    why));
  }
}

// A replica of `policy` running `base_model` on `gpu`; `group_engine`: its cluster group's
// engine keys.
PreparedReplica prepare_replica(const Scenario& s, const ConfigNode& policy,
                                const ModelSpec& base_model, const GpuSpec& gpu,
                                const std::optional<ConfigNode>& group_engine) {
  PreparedReplica r;
  PreparedReplica* p = &r;
  const ConfigNode engine_node = policy_engine(s.root, policy, group_engine);
  p->engine = parse_engine_config(engine_node);
  resolve_model_limits(p->engine, engine_node, base_model);  // before the pool's profile run
  check_mtp_layers(p->engine, engine_node, base_model);
  if (p->engine.speculative &&
      p->engine.speculative->method == SpeculativeConfig::Method::kDraftModel) {
    resolve_draft_model(p->engine, engine_node, base_model,
                        s.catalog ? *s.catalog : Catalog::builtin());
  }
  const EngineConfig& engine = p->engine;
  const ConfigNode kv_node = engine_node.optional_child("kv").value_or(
      ConfigNode::parse_string("{type: paged}", "default kv"));
  // The engine's weights_dtype / kv_cache_dtype replace the catalog model's; the pool holds one
  // GPU's share of it (tensor_parallel x pipeline_parallel GPUs).
  ModelSpec model = base_model;
  if (engine.weights_dtype) model.weight_dtype = *engine.weights_dtype;
  if (engine.kv_cache_dtype) model.kv_dtype = *engine.kv_cache_dtype;
  if (engine.images_off) model.vision_params = 0;  // vLLM builds no vision tower
  const Parallelism parallelism{engine.tensor_parallel, engine.pipeline_parallel,
                                engine.data_parallel, engine.expert_parallel};
  try {
    check_parallelism(model, parallelism);
  } catch (const InputError& e) {
    // Point at the degree that does not fit (tensor_parallel when both are written).
    for (const char* key :
         {"tensor_parallel", "pipeline_parallel", "data_parallel", "expert_parallel"}) {
      if (auto n = engine_node.optional_child(key)) n->fail(e.what());
    }
    throw;
  }
  p->pool = make_replica_pool(model, gpu, kv_node, engine_node, engine, parallelism);
  check_one_request_fits(*p->pool, kv_node, engine_node, engine);
  if (!parallelism.single() || engine.weights_dtype || engine.kv_cache_dtype) {
    const ModelSpec& share = p->pool->model();
    p->gpu_layout =
        GpuLayoutSummary{.gpus = parallelism.gpus(),
                         .tensor_parallel = parallelism.tensor,
                         .pipeline_parallel = parallelism.pipeline,
                         .weights_dtype = std::string(dtype_name(model.weight_dtype)),
                         .kv_cache_dtype = std::string(dtype_name(model.kv_dtype)),
                         .weights_bytes_per_gpu = share.weights_bytes(),
                         .kv_bytes_per_token_per_gpu = share.kv_bytes_per_token(),
                         .kv_pool_tokens_per_gpu = pool_tokens_per_gpu(*p->pool, kv_node, engine)};
  }
  engine_node.reject_unknown_keys();
  if (engine.attention_kernel && !engine.profile_path.empty()) {
    engine_node.child("attention_kernel")
        .fail(
            "attention_kernel picks the built-in profile's flash efficiency; with engine.profile "
            "the profile file decides (write one with kvsim-validate profile --attention-kernel)");
  }
  Profile profile;
  if (engine.profile_path.empty()) {
    try {
      profile = default_profile(gpu, engine.attention_kernel);
    } catch (const InputError& e) {
      engine_node.child("attention_kernel").fail(e.what());
    }
  } else {
    profile = load_profile(engine.profile_path);
  }
  p->latency = std::make_unique<LatencyModel>(model, gpu, profile, engine.attention, parallelism);
  p->latency->set_collective_settings(collective_settings(engine));
  p->guards =
      make_guards(policy.optional_child("guards").value_or(ConfigNode::parse_string("[]", "none")),
                  model, kv_node.get<std::string>("type"));
  return r;
}

// Every key a policy accepts (the unknown-key error lists them).
const std::vector<std::string> kPolicyKeys = {"name",    "engine", "guards", "slo",
                                              "cluster", "model",  "gpu"};

std::unique_ptr<PreparedPolicy> prepare_policy(const Scenario& s, const ConfigNode& policy) {
  auto p = std::make_unique<PreparedPolicy>();
  if (!policy.is_map()) policy.fail_expected("a policy like {name: paged, guards: []}");
  policy.allow(kPolicyKeys);
  policy.reject_unknown_keys_listing("a policy");
  p->name = policy.get<std::string>("name");
  // The policy's own model and GPU (a what-if beside the scenario's), else the scenario's; a
  // cluster group's own go on top of those.
  const Catalog& catalog = s.catalog ? *s.catalog : Catalog::builtin();
  ModelSpec model = s.model;
  GpuSpec gpu = s.gpu;
  if (auto m = policy.optional_child("model")) {
    model = load_model_node(*m, catalog);
    p->model = model.name;
  }
  if (auto g = policy.optional_child("gpu")) {
    gpu = resolve_gpu(*g, catalog);
    p->gpu = gpu.name;
  }
  const std::optional<ClusterConfig> cluster = cluster_config(s.root, policy);
  if (!cluster) {
    p->replicas.push_back(prepare_replica(s, policy, model, gpu, std::nullopt));
  } else {
    for (const ReplicaGroupConfig& g : cluster->groups) {
      const GpuSpec group_gpu = g.gpu ? resolve_gpu(*g.gpu, catalog) : gpu;
      const ModelSpec group_model = g.model ? load_model_node(*g.model, catalog) : model;
      const size_t first = p->replicas.size();
      for (int i = 0; i < g.count; ++i) {
        PreparedReplica r = prepare_replica(s, policy, group_model, group_gpu, g.engine);
        r.id = ReplicaIdentity{.label = fmt::format("{}-{}", g.name, i),
                               .group = g.name,
                               .gpu = group_gpu.name,
                               .role = g.role,
                               .index = i,
                               .gpus = r.engine.tensor_parallel * r.engine.pipeline_parallel,
                               .model = g.model ? group_model.name : ""};
        p->replicas.push_back(std::move(r));
      }
      for (LockstepRanks& l :
           lockstep_groups(g, group_model.moe(), p->replicas.at(first).engine, first)) {
        p->lockstep.push_back(std::move(l));
      }
    }
    p->router = make_router(cluster->router, RouterContext{.seed = s.seed});
    p->router_type = cluster->router.get<std::string>("type", "round_robin");
    p->kv_transfer = {.gb_per_s = cluster->kv_transfer_gb_per_s,
                      .latency_us = cluster->kv_transfer_latency_us};
  }
  p->workload = make_workload(s.root.child("workload"), s.seed);
  p->slo = policy_slo(s.root, policy);
  return p;
}

std::string emit(const YAML::Node& tree) {
  YAML::Emitter emitter;
  emitter << tree;
  return emitter.c_str();
}

// scenario_hash has always started from 1469598103934665603, a digit short of FNV's standard
// offset basis. Kept, so every scenario_hash already written (manifests, sweep folders that
// resume by it, figure captions) stays valid.
constexpr uint64_t kScenarioHashBasis = 1469598103934665603ull;
std::string hash_text(const std::string& text) {
  return fmt::format("{:016x}", fnv1a64(text, kScenarioHashBasis));
}

}  // namespace

std::string scenario_hash(const YAML::Node& tree) { return hash_text(emit(tree)); }

PreparedScenario prepare_scenario(const Scenario& s, const RunOptions&) {
  PreparedScenario prepared;
  prepared.scenario_ = &s;
  const ConfigNode policies = s.root.child("policies");
  if (!policies.is_sequence() || policies.size() == 0) {
    policies.fail_expected("a non-empty list of policies");
  }
  std::map<std::string, ConfigNode> names;
  for (size_t i = 0; i < policies.size(); ++i) {
    check_unique_name(policies.at(i), names);
    prepared.policies_.push_back(prepare_policy(s, policies.at(i)));
  }
  s.root.child("workload");
  s.root.reject_unknown_keys();
  prepared.resolved_ = emit(s.root.yaml());
  prepared.hash_ = hash_text(prepared.resolved_);
  return prepared;
}

}  // namespace kvsim
