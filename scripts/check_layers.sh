#!/usr/bin/env bash
# The layering rule (docs/architecture.md), checked on every #include "..." of the project's own
# code under ROOT (default: the repository): a folder may include only the folders below it.
#   core/                      nothing else of the project
#   models/ workloads/ kernels/  core/ and themselves
#   sim/                       core/ models/ workloads/ sim/
#   validate/                  core/ models/ kernels/ validate/
#   validate/replay/           also sim/: kvsim's engine with a measured clock
#   apps/                      anything (nothing includes apps/ but apps/)
#   python/                    core/ models/ workloads/ sim/ python/ (a peer of apps/, not above it)
# Prints one line per violation (file:line: folder may not include target) and exits 1 if any.
set -euo pipefail
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"

declare -A allowed=(
  [core]="core"
  [models]="core models"
  [workloads]="core workloads"
  [kernels]="core kernels"
  [sim]="core models workloads sim"
  [validate]="core models kernels validate"
  [validate/replay]="core models workloads kernels sim validate"
  [apps]="core models workloads kernels sim validate apps"
  [python]="core models workloads sim python"
)
layers=(core models workloads kernels sim validate validate/replay apps python)

bad=0
for layer in "${layers[@]}"; do
  [[ -d "$root/$layer" ]] || continue
  while IFS=: read -r file line text; do
    target="${text#*\"}"
    target="${target%%/*}"
    # Only includes of the project's own top-level folders count (a plain "x.h" is a sibling).
    [[ " ${layers[*]} " == *" $target "* ]] || continue
    # validate/replay/ is a layer of its own, checked on its own pass.
    [[ "$layer" == validate && "$file" == "$root/validate/replay/"* ]] && continue
    if [[ " ${allowed[$layer]} " != *" $target "* ]]; then
      echo "${file#"$root"/}:$line: $layer/ may not include $target/ (allowed: ${allowed[$layer]})"
      bad=1
    fi
  done < <(grep -rnE --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' \
             '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$root/$layer" || true)
done
exit "$bad"
