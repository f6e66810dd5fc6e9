#!/usr/bin/env bash
# Plants models/x.cc including "sim/serving/replica.h" (and core/y.h including "models/z.h") in a
# temporary tree: check_layers.sh must exit 1 and name both lines; a clean tree must pass.
set -euo pipefail
check="$1"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/models" "$tree/core" "$tree/sim"
printf '#include "core/errors.h"\n#include "sim/serving/replica.h"\n' >"$tree/models/x.cc"
printf '#include <vector>\n#include "models/z.h"\n' >"$tree/core/y.h"
printf '#include "models/z.h"\n#include "core/errors.h"\n' >"$tree/sim/ok.cc"
if out="$(bash "$check" "$tree")"; then
  echo "FAIL: the planted violations passed"; exit 1
fi
grep -q '^models/x.cc:2: models/ may not include sim/' <<<"$out" || { echo "FAIL: $out"; exit 1; }
grep -q '^core/y.h:2: core/ may not include models/' <<<"$out" || { echo "FAIL: $out"; exit 1; }
[[ "$(wc -l <<<"$out")" -eq 2 ]] || { echo "FAIL: expected 2 lines: $out"; exit 1; }
rm "$tree/models/x.cc" "$tree/core/y.h"
bash "$check" "$tree" || { echo "FAIL: a clean tree failed"; exit 1; }
echo "ok: both planted violations found, the clean tree passes"
