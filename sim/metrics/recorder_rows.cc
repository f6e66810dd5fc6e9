// The Recorder's rows: requests.csv and timeseries.csv, their headers and each row's text, the
// one per-request formatting cost every run with an output folder pays (cells by row_format.h).
#include <fmt/format.h>

#include "sim/metrics/recorder.h"
#include "sim/metrics/row_format.h"

namespace kvsim {

namespace {

// A tier's timeseries columns, each named after `tier` (cpu_tier, disk_tier).
std::string rows_tier_columns(std::string_view tier) {
  return fmt::format(",{0}_blocks,{0}_bytes,{0}_stored_blocks,{0}_evicted_blocks", tier);
}

// A tier's four cells (TierSample), or four empty ones for a policy without the tier.
char* rows_write_tier(char* p, const std::optional<TierSample>& tier) {
  if (!tier) return write_text(p, ",,,,");
  for (const int64_t v : {tier->blocks, tier->bytes, tier->stored_blocks, tier->evicted_blocks}) {
    *p++ = ',';
    p = write_int(p, v);
  }
  return p;
}

}  // namespace

std::string Recorder::request_header(bool replica, OffloadColumns offload) {
  return std::string(
             "policy,id,arrival_s,prompt_tokens,prompt_tokens_served,output_tokens,generated,"
             "outcome,ttft_s,tpot_s,e2e_s,preemptions,tokens_dropped,"
             "guard_queue_s,engine_wait_s,prefill_s,decode_s,preempted_s") +
         (offload.tiers ? ",ttft_queueing_s,ttft_loading_s,ttft_prefill_s" : "") +
         (replica ? ",replica\n" : "\n");
}

std::string Recorder::timeseries_header(bool replica, OffloadColumns offload) {
  std::string h = "policy,t_s";
  for (int c = 0; c < kMemCategoryCount; ++c) {
    h += fmt::format(",{}_bytes", mem_category_name(static_cast<MemCategory>(c)));
  }
  h += ",torch_allocated_bytes,torch_reserved_bytes,driver_free_bytes,guard_queue,waiting,running";
  if (offload.tiers) h += rows_tier_columns("cpu_tier");
  if (offload.disk) h += rows_tier_columns("disk_tier");
  return h + (replica ? ",replica\n" : "\n");
}

void Recorder::write_request_row(const RequestState& r, bool served, std::optional<double> per,
                                 const std::array<SimTime, 5>& ns,
                                 const std::array<SimTime, 3>& split, std::string_view replica) {
  // One row written straight into line_ (digits into a reused buffer, seconds from integer ns
  // where that gives fmt's bytes: a row per request is a visible share of a long run's CPU).
  // ttft, tpot and e2e are empty for requests not served. Room first: every cell fits in
  // kMaxCellChars, the names in their own length.
  const std::string_view outcome = outcome_name(r.outcome);
  const size_t room = policy_.size() + outcome.size() + replica.size() + 28 * kMaxCellChars;
  if (line_.size() < room) line_.resize(room);
  char* const start = line_.data();
  char* p = write_text(start, policy_);
  *p++ = ',';
  p = write_int(p, r.spec.id);
  *p++ = ',';
  p = write_seconds_6(p, r.spec.arrival);
  for (const int64_t v :
       {r.spec.prompt_tokens, r.prompt_tokens, r.spec.output_tokens, r.generated}) {
    *p++ = ',';
    p = write_int(p, v);
  }
  *p++ = ',';
  p = write_text(p, outcome);
  *p++ = ',';
  if (served) {
    p = write_seconds_6(p, r.first_token_at - r.spec.arrival);  // t1
    *p++ = ',';
    if (per) p = write_fixed_6(p, *per);
    *p++ = ',';
    p = write_seconds_6(p, r.finished_at - r.spec.arrival);  // tend
    *p++ = ',';
  } else {
    p = write_text(p, ",,,");
  }
  p = write_int(p, r.preemptions);
  *p++ = ',';
  p = write_int(p, r.tokens_dropped);
  *p++ = ',';
  if (served) {
    // The breakdown in exact ns (9 decimals), so its cells sum to E2E to the nanosecond.
    for (size_t i = 0; i < ns.size(); ++i) {
      if (i > 0) *p++ = ',';
      p = write_seconds_9(p, ns[i]);
    }
  } else {
    p = write_text(p, ",,,,");  // the breakdown: served requests only
  }
  if (columns_.tiers) {  // the TTFT split, exact ns as the breakdown; served requests only
    for (const SimTime v : split) {
      *p++ = ',';
      if (served) p = write_seconds_9(p, v);
    }
  }
  if (!replica.empty()) {
    *p++ = ',';
    p = write_text(p, replica);
  }
  *p++ = '\n';
  rows_.put(r.spec.id, std::string_view(start, static_cast<size_t>(p - start)),
            [this](std::string_view row) { request_file_->append(row); });
}

void Recorder::on_sample(SimTime t, const MemorySnapshot& s, int64_t guard_queue, int64_t waiting,
                         int64_t running, const TierSamples* tiers) {
  if (!timeseries_file_) return;
  // As a requests.csv row: straight into line_.
  const size_t room = policy_.size() + replica_.size() + 28 * kMaxCellChars;
  if (line_.size() < room) line_.resize(room);
  char* const start = line_.data();
  char* p = write_text(start, policy_);
  *p++ = ',';
  p = write_seconds_3(p, t);
  for (const int64_t b : s.categories()) {
    *p++ = ',';
    p = write_int(p, b);
  }
  for (const int64_t v : {s.torch_allocated_bytes, s.torch_reserved_bytes, s.driver_free_bytes,
                          guard_queue, waiting, running}) {
    *p++ = ',';
    p = write_int(p, v);
  }
  if (columns_.tiers) p = rows_write_tier(p, tiers ? std::optional(tiers->cpu) : std::nullopt);
  if (columns_.disk) p = rows_write_tier(p, tiers ? tiers->disk : std::nullopt);
  if (cluster_) {
    *p++ = ',';
    p = write_text(p, replica_);
  }
  *p++ = '\n';
  timeseries_file_->append(std::string_view(start, static_cast<size_t>(p - start)));
}

}  // namespace kvsim
