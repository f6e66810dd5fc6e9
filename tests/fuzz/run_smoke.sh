#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time on its seed folders (ctest's fuzz smoke, and
# scripts/fuzz.sh's longer hunt). libFuzzer's output goes to LOG and, on failure, to stderr so
# ctest shows it; a crashing input is kept under CRASHES/<target>-*.
# Usage: run_smoke.sh TARGET_BINARY SECONDS WORK_DIR SEED_DIR...
#   WORK_DIR/corpus/<target>/ (the growing corpus, kept between runs), WORK_DIR/logs/<target>.log,
#   WORK_DIR/crashes/<target>-<hash>.
set -uo pipefail
bin="$1" seconds="$2" work="$3"
shift 3
name="$(basename "$bin")"
mkdir -p "$work/corpus/$name" "$work/logs" "$work/crashes"
log="$work/logs/$name.log"
seeds=()
for d in "$@"; do [[ -d "$d" ]] && seeds+=("$d"); done
# -timeout: one input taking over 5 s is a hang (bad input must be answered within a second).
# -rss_limit_mb: a runaway allocation is a finding, not a dead machine. -max_len: libFuzzer would
# otherwise size inputs from the largest seed (the shipped traces are megabytes); a target whose
# seeds must stay whole sets KVSIM_FUZZ_MAX_LEN.
"$bin" "$work/corpus/$name" "${seeds[@]}" -max_total_time="$seconds" -timeout=5 \
  -rss_limit_mb=2048 -max_len="${KVSIM_FUZZ_MAX_LEN:-65536}" -print_final_stats=1 \
  -artifact_prefix="$work/crashes/$name-" >"$log" 2>&1
rc=$?
execs="$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')"
rate="$(grep -m1 'stat::average_exec_per_sec' "$log" | awk '{print $2}')"
if ((rc != 0)); then
  tail -n 60 "$log" >&2
  echo "fuzz smoke: $name FAILED (exit $rc) after ${execs:-?} executions; log: $log; input: $work/crashes/" >&2
  exit 1
fi
echo "fuzz smoke: $name ok: ${execs:-?} executions in $seconds s (${rate:-?}/s)"
