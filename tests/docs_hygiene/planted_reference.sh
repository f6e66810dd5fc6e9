#!/usr/bin/env bash
# The tracker-reference check must be able to fail: a planted tree with one clean file and, one
# at a time, each kind of reference it looks for; every planted tree must fail and name the file
# and line, and the clean tree must pass.
set -euo pipefail
check="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/sim" "$tmp/build/x"
printf '// A clean comment: sessions 0, 1, 2 of a trace are routed by hash.\n' > "$tmp/sim/clean.h"
# Build folders are not checked (their files are generated).
printf 'see iss''ue 3\n' > "$tmp/build/x/generated.txt"
bash "$check" "$tmp" || { echo "FAIL: the clean tree was rejected"; exit 1; }
# Each planted text is split so this script does not itself hold a reference.
for planted in 'Iss''ue 17 item 4' 'iss''ue #9' 'iss''ues 6 and 17' 'as the iss''ue says' \
               'the iss''ue'"'"'s figure' 'Sess''ion 8'"'"'s build' 'sess''ion-7 build'; do
  printf 'line one\n// %s: why\n' "$planted" > "$tmp/sim/planted.md"
  if out="$(bash "$check" "$tmp" 2>&1)"; then
    echo "FAIL: planted '$planted' was not found"; exit 1
  fi
  [[ "$out" == *"sim/planted.md:2:"* ]] || { echo "FAIL: '$planted' not reported at its line: $out"; exit 1; }
done
echo "every planted reference was found"
