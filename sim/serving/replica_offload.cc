// The replica's KV offloading (engine.kv_offloading): its connector to the CPU tier
// (sim/serving/offload/offload_connector.h), hooked into the waiting queue's admissions, the
// launched steps' stores and the loads' ends.
#include "sim/serving/offload/offload_connector.h"
#include "sim/serving/replica.h"

#include "core/check.h"
#include "models/memory/kv_capabilities.h"

namespace kvsim {

void Replica::set_up_offload() {
  const PagedBlocks* paged = pool_.kv().paged();
  KVSIM_CHECK(paged != nullptr && paged->prefix_caching(),
              "kv_offloading needs a paged store with prefix caching (checked at parse)");
  const OffloadConnector::Link link{.gpu_block_tokens = paged->block_tokens(),
                                    .kv_bytes_per_token = pool_.kv().kv_bytes_per_token(),
                                    .bytes_per_s = pool_.gpu().pcie_bytes_per_s,
                                    .tensor_parallel = config_.tensor_parallel};
  offload_ = std::make_unique<OffloadConnector>(*config_.kv_offloading, link, events_,
                                                recorder_.on_kv_offloading(),
                                                [this](int64_t id) { offload_loaded(id); });
  queues_.set_offload(
      [this](const RequestState& r, int64_t cached, int64_t target) {
        return offload_->matched_tokens(r, cached, target);
      },
      [this](RequestState& r, int64_t cached, int64_t hit) {
        r.loading_since = events_.now();
        offload_->start_load(r, cached, hit);
      });
}

void Replica::set_kv_event_sink(const KvEventSink& sink) {
  pool_.kv().set_event_sink(sink);
  if (offload_) offload_->set_event_sink(sink);
}

void Replica::offload_loaded(int64_t id) {
  auto f = requests_.find(id);
  // A request that ended while loading (its deadline, a crash) released its KV then.
  if (f == requests_.end() || f->second.phase != Phase::kLoading) return;
  RequestState& r = f->second;
  if (!r.scheduled) r.loading_ns += events_.now() - r.loading_since;  // (TTFT's loading part)
  r.loading_since = -1;
  queues_.loaded(r);
  if (check_) check();
  kick();
}

void Replica::plan_offload_stores(const IterationPlan& it) {
  for (size_t i = 0; i < it.prefill_ids.size(); ++i) {
    const RequestState& r = requests_.at(it.prefill_ids[i]);
    offload_->plan_store(r, r.prefilled + it.prefill_chunks[i]);
  }
}

}  // namespace kvsim
