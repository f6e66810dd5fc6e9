// The V0 host path (engine.vllm_version below 0.8; sim/serving/host_path.h, docs/latency.md
// "The host path of a vLLM version"): vLLM 0.6's LLMEngine with async output processing.
//
//   step N      |-- host --|====== forward N ======|          (tokens of N appended on the
//   step N+1                                       |-- host --|== forward N+1 ==|  critical path)
//                                                             ^ _process_model_outputs(N) runs
//                                                               here, before N+1's sampler; it
//                                                               stamps N's first tokens and
//                                                               ends N's finished requests
//
// LLMEngine.step schedules N+1 before N's outputs are processed (_advance_to_next_step only
// appends the token ids), so a request whose last token N made still runs, holding its blocks
// and its place under max_num_seqs, until that processing frees it
// (Scheduler.free_finished_seq_groups, called from _process_model_outputs). The processing runs
// on the CPU while N+1's kernels run (ModelRunner.execute_model calls model_input.async_callback
// after launching the forward): N's tokens are stamped at N+1's start plus its host work (the
// profile's per-step overhead) plus the processing time (v0_output_processing_s); N+1 lasts at
// least that long. With nothing scheduled after N, LLMEngine.step processes N's outputs at once.
//
// Where kvsim differs: the finished requests keep their blocks in N+1 but are not in its batch
// (vLLM runs one more decode for each); their blocks are freed when N+1 ends, not during it.
#include <algorithm>

#include "sim/serving/replica.h"

namespace kvsim {

void Replica::v0_token_made(RequestState& r) {
  if (r.first_token_at < 0) v0_first_.push_back(r.spec.id);
}

void Replica::v0_hold_finished(int64_t id) {
  queues_.leave_decodes(requests_.at(id));  // out of the decoding set: it grows no more
  v0_finished_.push_back(id);
}

SimTime Replica::v0_outputs_processed(SimTime duration) {
  const double host_s = latency_.profile().iteration_overhead_s;
  const SimTime processed = seconds_to_sim(host_s + v0_output_processing_s(v0_seqs_));
  v0_processed_at_ = events_.now() + processed;
  for (const int64_t id : v0_first_) {
    auto f = requests_.find(id);
    if (f != requests_.end() && f->second.first_token_at < 0)
      f->second.first_token_at = v0_processed_at_;
  }
  v0_first_.clear();
  v0_seqs_ = 0;
  return std::max(duration, processed);
}

void Replica::v0_drain() {
  if (v0_first_.empty() && v0_finished_.empty()) {
    v0_seqs_ = 0;
    return;
  }
  const SimTime at = events_.now() + seconds_to_sim(v0_output_processing_s(v0_seqs_));
  for (const int64_t id : v0_first_) {
    auto f = requests_.find(id);
    if (f != requests_.end() && f->second.first_token_at < 0) f->second.first_token_at = at;
  }
  v0_first_.clear();
  v0_seqs_ = 0;
  v0_processed_at_ = at;
  v0_release_processed();
  recorder_.on_state(events_.now(), pool_.snapshot());
}

void Replica::v0_release_processed() {
  if (v0_processed_at_ < 0) return;
  const SimTime at = v0_processed_at_;
  v0_processed_at_ = -1;
  if (v0_finished_.empty()) return;
  for (const int64_t id : v0_finished_) {
    auto f = requests_.find(id);
    // (A plan may have preempted it: it ends from the waiting queue, as vLLM's output
    // processing finishes it wherever it is.)
    if (f == requests_.end() || f->second.outcome != Outcome::kNone) continue;
    finish_request(id, f->second.truncated ? Outcome::kCompletedTruncated : Outcome::kCompleted,
                   at);
  }
  v0_finished_.clear();
  run_admission();  // guards that waited for their memory may admit now
}

}  // namespace kvsim
