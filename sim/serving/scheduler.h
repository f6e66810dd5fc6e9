// Scheduler: decides what one iteration of a replica runs (which requests prefill, and how much,
// beside the decoding ones), within limits passed in with every plan; it never edits the engine's
// configuration. A scheduler only composes PlanSteps; the replica's RunQueues carries each step
// out (KV growth, preemption, swap, OOM). Implementations are chosen by the engine's
// `scheduler:` key through a Registry<SchedulerFactory> (register_schedulers.cc):
//   continuous  iteration-level batching (Orca, vLLM); chunked prefill is one of its limits
//   static      fixed batches of batch_size requests, prefilled whole, run until all finish
//   vllm_v0     vLLM V0's default step rule: a step that admits prompts runs prefills only
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/registry.h"
#include "sim/request/request_state.h"

namespace kvsim {

// What one iteration may hold. A scheduler plans within them; it may derive narrower ones (the
// static scheduler's batch) but never changes the caller's.
struct BatchLimits {
  int64_t max_num_seqs = 256;  // sequences running at once
  int64_t max_num_batched_tokens =
      16384;                     // tokens per iteration (one longer whole prompt runs alone)
  bool chunked_prefill = false;  // split prompts to fill the token budget
  int64_t batch_size = 8;        // static batching: requests per fixed batch
  // vLLM V1's scheduler_reserve_full_isl: a waiting request (new or preempted) is admitted only
  // when the free blocks hold its whole sequence (prompt + tokens generated so far, less its
  // prefix hits), though only its first chunk is allocated (KVCacheManager.allocate_slots,
  // full_sequence_must_fit).
  bool reserve_full_sequence = true;
  // vLLM V1's long_prefill_token_threshold: a prefill takes at most this many tokens a step
  // (0: no cap). Then several partial prefills may run, and the running requests are served in
  // running order, prefills among the decodes (PlanSteps::walk_running).
  int64_t long_prefill_token_threshold = 0;

  bool operator==(const BatchLimits&) const = default;
};

// One iteration's plan: the prefill chunks and the decoding sequences.
struct IterationPlan {
  std::vector<int64_t> prefill_ids;
  std::vector<int64_t> prefill_chunks;
  // Decoding sequences, by address: no lookup per sequence. Safe because a running request
  // stays in the replica's requests until end_iteration (finish_request checks it).
  std::vector<RequestState*> decode;
  // How many sequences decode. Stepping: decode.size(). With the decode aggregate
  // (lazy_decodes.h), `decode` holds only the ones grown through the ledger this step; this
  // counts them all.
  int64_t decode_seqs = 0;
  // Sum of the decoding sequences' attended KV tokens: their contexts, each capped at the model's
  // sliding window (ModelSpec::attended_tokens).
  int64_t decode_context = 0;
  // Speculative decoding: the draft tokens the decodes verify (RequestState::spec_drafts summed),
  // each one of the token budget beside the decode's own token.
  int64_t spec_tokens = 0;
  // Async scheduling with speculation: decodes this plan scheduled whose last tokens the step
  // before turned out to have produced (vLLM plans before that output); they finish right after
  // the plan, so only their shape stays: its KV before and its query tokens (1 + drafts).
  struct Finished {
    int64_t id = 0;
    int64_t kv_before = 0;
    int64_t tokens = 0;
  };
  std::vector<Finished> finished_in_flight;
  int64_t finished_tokens() const {
    int64_t n = 0;
    for (const Finished& f : finished_in_flight) n += f.tokens;
    return n;
  }
  // Running requests still prefilling, counted by grow_decodes (an upper bound: preemption
  // may remove some); -1 when not counted. 0 lets admit_prefills skip its walk over running.
  int64_t running_prefills = -1;
  double extra_seconds = 0;  // swap traffic over PCIe
  // Requests preempted while planning this step: vLLM V1's schedule() visits the waiting queue
  // only when there are none.
  int64_t preempted = 0;
  // The walk over the running requests ended early (one preempted itself under the priority
  // policy): the running requests it did not reach, prefills included, wait this step out.
  bool running_walk_ended = false;

  bool empty() const {
    return prefill_ids.empty() && decode_seqs == 0 && finished_in_flight.empty();
  }
  // Member by member (the vectors trade buffers): std::swap's moves through a temporary plan
  // cost a destructor call on every iteration's hand-over.
  friend void swap(IterationPlan& a, IterationPlan& b) noexcept {
    zip_members(a, b, [](auto& x, auto& y) {
      using std::swap;
      swap(x, y);
    });
  }
  // Empties the plan, keeping the vectors' capacity (no allocation per iteration): every other
  // member takes its initial value.
  void clear() {
    IterationPlan fresh;
    zip_members(*this, fresh, [](auto& member, const auto& initial) {
      if constexpr (requires { member.clear(); }) {
        member.clear();
      } else {
        member = initial;
      }
    });
  }

 private:
  // Calls fn on each pair of same members of a and b. The structured bindings name every data
  // member: one added to the struct and not here stops the build, so swap() and clear() cannot
  // leave a member out.
  template <class Fn>
  static void zip_members(IterationPlan& a, IterationPlan& b, Fn&& fn) {
    auto& [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10] = a;
    auto& [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10] = b;
    fn(a0, b0), fn(a1, b1), fn(a2, b2), fn(a3, b3), fn(a4, b4), fn(a5, b5);
    fn(a6, b6), fn(a7, b7), fn(a8, b8), fn(a9, b9), fn(a10, b10);
  }
};

// The steps a scheduler composes into a plan. Each returns false when an OOM ended the plan (the
// replica has already handled it: crash or abort).
class PlanSteps {
 public:
  virtual bool has_running() const = 0;
  virtual bool has_swapped() const = 0;
  virtual bool all_running_decode() const = 0;  // every running request has finished its prefill
  // Brings swapped requests back while `limits.max_num_seqs` allows and their KV fits.
  virtual void swap_in(IterationPlan& it, const BatchLimits& limits) = 0;
  // Grows every decoding request by one token, preempting on a shortage.
  virtual bool grow_decodes(IterationPlan& it) = 0;
  // Continues running prefills, then admits waiting requests, within `limits`.
  virtual bool admit_prefills(IterationPlan& it, const BatchLimits& limits) = 0;
  // vLLM V1's running loop as it is: every running request in running order, a decode's token
  // or a prefill's next chunk (at most limits.long_prefill_token_threshold), until the token
  // budget is spent; admit_prefills then only admits. By default the decodes, then the prefills
  // (the same order while a partial prefill is always the newest running request: no threshold).
  virtual bool walk_running(IterationPlan& it, const BatchLimits& limits) {
    (void)limits;
    return grow_decodes(it);
  }

 protected:
  ~PlanSteps() = default;
};

// A read-only view of a replica's queues, for a scheduler's answer about a decode-only period
// (Scheduler::admits_nothing).
class QueueView {
 public:
  // Whether admit_prefills, after a decode walk of `decoding` requests, runs no chunk, admits
  // nothing and makes no call with an effect, and keeps so while free blocks only shrink, as if
  // `walk_frees` more blocks were free (RunQueues::prefills_blocked, with the replica's guards).
  // Conservative: false when unsure.
  virtual bool prefills_blocked(const BatchLimits& limits, int64_t decoding,
                                int64_t walk_frees) const = 0;
  // Whether a running request is still prefilling.
  virtual bool has_prefilling() const = 0;

 protected:
  ~QueueView() = default;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Plans one iteration into `it` (empty on entry). False when an OOM ended the plan.
  virtual bool plan(IterationPlan& it, const BatchLimits& limits, PlanSteps& steps) const = 0;
  // Whether it can plan a step while the one before runs (vLLM V1's AsyncScheduler, the
  // engine's async_scheduling): only a plan that reads a running request's in-flight token as
  // done (V1's output placeholders) can.
  virtual bool plans_ahead() const { return false; }
  // What the engine's other keys may ask of it, asked at parse time (engine_config.cc): whether
  // it runs speculative decoding's steps (vLLM V1's scheduler does), whether it caps a prefill's
  // chunk at long_prefill_token_threshold (V1's, with chunked prefill), and whether vLLM V0 had
  // it (its default step rule, or its chunked-prefill scheduler), so an engine.vllm_version
  // before V1 may name it.
  virtual bool runs_speculation() const { return false; }
  virtual bool caps_long_prefills() const { return false; }
  virtual bool in_vllm_v0() const { return false; }
  // Decode-only periods in closed form (docs/fast-forward.md). closed_form_periods: whether this
  // scheduler's plans can be, step after step, exactly one grow_decodes walk and nothing else, so
  // that the replica may run such periods without calling plan() each step (false, the safe
  // default: every plan is made). admits_nothing: whether, with nothing swapped and every
  // running request decoding (`decoding` of them) or stalled, no plan admits or continues a
  // prefill, and none will while free blocks only shrink. `walk_frees`: blocks the plan's own
  // decode walk frees (sliding windows), which a plan that walks the decodes before it admits
  // sees free. Conservative: false when unsure.
  virtual bool closed_form_periods() const { return false; }
  virtual bool admits_nothing(const QueueView& queues, const BatchLimits& limits, int64_t decoding,
                              int64_t walk_frees) const {
    (void)queues, (void)limits, (void)decoding, (void)walk_frees;
    return false;
  }
};

using SchedulerFactory = std::function<std::unique_ptr<Scheduler>()>;

// Adds "continuous", "static" and "vllm_v0" (in that order: the order the `scheduler:` choices are
// listed).
void register_schedulers(Registry<SchedulerFactory>& registry);
// The registry filled by register_schedulers(), built on first use.
const Registry<SchedulerFactory>& scheduler_registry();

std::unique_ptr<Scheduler> make_continuous_scheduler();
std::unique_ptr<Scheduler> make_static_scheduler();
std::unique_ptr<Scheduler> make_vllm_v0_scheduler();

}  // namespace kvsim
