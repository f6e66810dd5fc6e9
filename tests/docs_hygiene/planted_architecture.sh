#!/usr/bin/env bash
# scripts/check_architecture_doc.sh must be able to fail: on a copy of the tree (links to the
# real files) whose docs/architecture.md states a wrong variant count, a wrong scenario count,
# names a file that does not exist, or names another writer of the result files, it fails and
# says which; on the unchanged copy it passes.
set -euo pipefail
check="$1"
root="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for d in core models workloads kernels sim validate apps python scripts tests bench docs scenarios; do
  [[ -d "$root/$d" ]] && cp -as "$root/$d" "$tmp/$d"
done
doc="$tmp/docs/architecture.md"
orig="$(cat "$root/docs/architecture.md")"
bash "$check" "$tmp" || { echo "FAIL: the unchanged doc was rejected"; exit 1; }
plant() {  # plant SED_EXPR EXPECTED_MESSAGE
  rm -f "$doc"
  sed -E "$1" <<<"$orig" >"$doc"
  if cmp -s "$doc" "$root/docs/architecture.md"; then echo "FAIL: '$1' changed nothing"; exit 1; fi
  if out="$(bash "$check" "$tmp" 2>&1)"; then echo "FAIL: '$1' was not caught"; exit 1; fi
  [[ "$out" == *"$2"* ]] || { echo "FAIL: '$1' reported as: $out"; exit 1; }
}
plant 's/on ten engine variants/on six engine variants/' 'engine variants'
plant 's/checks that 200 random/checks that 100 random/' 'random scenarios'
plant 's#`sim/serving/kv_ledger.h`#`sim/serving/ledger.h`#' 'sim/serving/ledger.h'
plant 's#`write_run_outputs\(\)` \(`sim/run/run_outputs.cc`\)#the summary writer#' 'writer of the result files'
echo "every planted mistake was caught"
