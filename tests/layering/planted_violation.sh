#!/usr/bin/env bash
# Plants models/x.cc including "sim/serving/replica.h" (and core/y.h including "models/z.h") in a
# temporary tree: check_layers.sh must exit 1 and name both lines; a clean tree must pass. Then,
# inside sim/, sim/metrics/m.h including "sim/serving/s.h" (metrics sits below serving in sim's
# order) and a sub-folder sim/newfolder/ that the order does not place: both must be named. Last,
# the fast-forward's room: sim/serving/run_queues.cc including one of its headers, and the
# replica including another than its interface, must be named; the replica including the
# interface passes.
set -euo pipefail
check="$1"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
# The check on the tree must fail ($1 names what was planted), printing exactly one line per
# pattern given after it, each matching.
expect_violations() {
  local what="$1"
  shift
  if out="$(bash "$check" "$tree")"; then
    echo "FAIL: $what passed"; exit 1
  fi
  local p
  for p in "$@"; do grep -q "$p" <<<"$out" || { echo "FAIL: $out"; exit 1; }; done
  [[ "$(wc -l <<<"$out")" -eq $# ]] || { echo "FAIL: expected $# lines: $out"; exit 1; }
}
mkdir -p "$tree/models" "$tree/core" "$tree/sim/serving" "$tree/sim/metrics" "$tree/sim/request"
printf '#include "core/errors.h"\n#include "sim/serving/replica.h"\n' >"$tree/models/x.cc"
printf '#include <vector>\n#include "models/z.h"\n' >"$tree/core/y.h"
printf '#include "models/z.h"\n#include "core/errors.h"\n' >"$tree/sim/ok.cc"
# Allowed inside sim/: serving over metrics and request, metrics over request, a folder itself.
printf '#include "sim/metrics/m.h"\n#include "sim/request/r.h"\n#include "sim/serving/t.h"\n' >"$tree/sim/serving/s.h"
printf '#include "sim/request/r.h"\n' >"$tree/sim/metrics/ok.h"
expect_violations "the planted violations" '^models/x.cc:2: models/ may not include sim/' \
  '^core/y.h:2: core/ may not include models/'
rm "$tree/models/x.cc" "$tree/core/y.h"
bash "$check" "$tree" || { echo "FAIL: a clean tree failed"; exit 1; }

printf '#include <vector>\n#include "sim/request/r.h"\n#include "sim/serving/s.h"\n' >"$tree/sim/metrics/m.h"
mkdir -p "$tree/sim/newfolder"
printf '#include "sim/request/r.h"\n' >"$tree/sim/newfolder/n.h"
expect_violations "the planted violations inside sim/" \
  '^sim/metrics/m.h:3: sim/metrics/ may not include sim/serving/' '^sim/newfolder/: not in'
rm -r "$tree/sim/metrics/m.h" "$tree/sim/newfolder"
bash "$check" "$tree" || { echo "FAIL: a clean tree failed"; exit 1; }
mkdir -p "$tree/sim/serving/fast_forward"
printf '#include "sim/serving/s.h"\n#include "sim/serving/fast_forward/a.h"\n' >"$tree/sim/serving/fast_forward/fast_forward.h"
printf '#include "sim/serving/fast_forward/fast_forward.h"\n' >"$tree/sim/serving/replica.cc"
bash "$check" "$tree" || { echo "FAIL: the room's seam failed"; exit 1; }
printf '#include "sim/serving/s.h"\n#include "sim/serving/fast_forward/a.h"\n' >"$tree/sim/serving/run_queues.cc"
printf '#include "sim/serving/fast_forward/a.h"\n' >"$tree/sim/serving/replica_x.cc"
expect_violations "the planted entries into the fast-forward's room" \
  '^sim/serving/run_queues.cc:2: sim/serving/fast_forward/ is entered only through' \
  '^sim/serving/replica_x.cc:1: sim/serving/fast_forward/ is entered only through'
echo "ok: the planted violations found (between layers, inside sim/, into a room), the clean trees pass"
