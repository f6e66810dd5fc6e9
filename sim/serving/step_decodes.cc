#include "sim/serving/step_decodes.h"

#include "sim/serving/run_queues.h"

namespace kvsim {

bool StepDecodes::grow(IterationPlan& it) { return queues_.grow_each_decode(it); }

void StepDecodes::commit(const IterationPlan& it, std::vector<int64_t>& done) {
  const RunQueues::DecodeGain& gain = queues_.decode_gain();
  for (RequestState* rp : it.decode) {
    RequestState& r = *rp;
    if (r.phase != Phase::kRunning) continue;
    r.generated += gain ? gain(r) : 1;
    if (r.generated >= r.spec.output_tokens) done.push_back(r.spec.id);
  }
}

const std::vector<RequestState*>& StepDecodes::prefill_walk() const { return queues_.running(); }

const RequestState* StepDecodes::first_prefilling() const {
  for (const RequestState* r : queues_.running()) {
    if (!r->decoding()) return r;
  }
  return nullptr;
}

}  // namespace kvsim
