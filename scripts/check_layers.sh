#!/usr/bin/env bash
# The layering rule (docs/architecture.md), checked on every #include "..." of the project's own
# code under ROOT (default: the repository): a folder may include only the folders below it.
#   core/                      nothing else of the project
#   models/ workloads/ kernels/  core/ and themselves
#   sim/                       core/ models/ workloads/ sim/
#   validate/                  core/ models/ kernels/ validate/
#   validate/replay/           also sim/: kvsim's engine with a measured clock
#   validate/vllm_run/         also sim/: a measured vLLM run replayed through kvsim's engine
#   apps/                      anything (nothing includes apps/ but apps/)
#   python/                    core/ models/ workloads/ sim/ python/ (a peer of apps/, not above it)
# Inside sim/, its sub-folders have an order of their own (sim_order below, lowest first): a
# sub-folder includes only itself and the ones before it, and every sub-folder of sim/ must be in
# the order (a new one is placed there on purpose, not by accident).
# A room (rooms below: the fast-forward's folder) is entered only through its interface header,
# from its seam's files.
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
  [validate/vllm_run]="core models workloads kernels sim validate"
  [apps]="core models workloads kernels sim validate apps"
  [python]="core models workloads sim python"
)
layers=(core models workloads kernels sim validate validate/replay validate/vllm_run apps python)

# sim/'s sub-folders, lowest first: events; the scenario file; one request's state and outcome;
# the guards and the metrics that read it; the timeline that watches a replica; the replica
# itself; replicas behind a router; runs, sweeps of runs, and the capacity search over sweeps.
sim_order=(engine config request guards metrics timeline serving cluster run sweep capacity)
sim_rank() {  # the rank of sim sub-folder $1 in sim_order, or nothing
  local i
  for i in "${!sim_order[@]}"; do [[ "${sim_order[$i]}" == "$1" ]] && { echo "$i"; return; }; done
  return 0
}

bad=0
for layer in "${layers[@]}"; do
  [[ -d "$root/$layer" ]] || continue
  while IFS=: read -r file line text; do
    target="${text#*\"}"
    target="${target%%/*}"
    # Only includes of the project's own top-level folders count (a plain "x.h" is a sibling).
    [[ " ${layers[*]} " == *" $target "* ]] || continue
    # validate/replay/ and validate/vllm_run/ are layers of their own, checked on their own pass.
    [[ "$layer" == validate && "$file" == "$root/validate/replay/"* ]] && continue
    [[ "$layer" == validate && "$file" == "$root/validate/vllm_run/"* ]] && continue
    if [[ " ${allowed[$layer]} " != *" $target "* ]]; then
      echo "${file#"$root"/}:$line: $layer/ may not include $target/ (allowed: ${allowed[$layer]})"
      bad=1
    fi
  done < <(grep -rnE --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' \
             '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$root/$layer" || true)
done

# sim/'s sub-folders among themselves.
if [[ -d "$root/sim" ]]; then
  for dir in "$root"/sim/*/; do
    sub="$(basename "$dir")"
    if [[ -z "$(sim_rank "$sub")" ]]; then
      echo "sim/$sub/: not in check_layers.sh's order of sim/'s sub-folders (${sim_order[*]})"
      bad=1
    fi
  done
  while IFS=: read -r file line text; do
    rel="${file#"$root"/sim/}"
    [[ "$rel" == */* ]] || continue  # a file of sim/ itself
    sub="${rel%%/*}"
    target="${text#*\"sim/}"
    [[ "$target" == */* ]] || continue
    target="${target%%/*}"
    from="$(sim_rank "$sub")"
    to="$(sim_rank "$target")"
    [[ -n "$from" ]] || continue  # reported above
    if [[ -z "$to" ]]; then
      echo "${file#"$root"/}:$line: sim/$sub/ includes sim/$target/, which is not in the order of sim/'s sub-folders"
      bad=1
    elif (( to > from )); then
      echo "${file#"$root"/}:$line: sim/$sub/ may not include sim/$target/ (sim/'s order: ${sim_order[*]})"
      bad=1
    fi
  done < <(grep -rnE --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' \
             '^[[:space:]]*#[[:space:]]*include[[:space:]]+"sim/' "$root/sim" || true)
fi
# Rooms: a folder inside a layer that the rest of the code enters through one header, from the
# files named (a glob), its seam. The fast-forward (sim/serving/fast_forward/, docs/fast-forward.md)
# is entered through fast_forward.h, from the replica only.
rooms=("sim/serving/fast_forward|sim/serving/fast_forward/fast_forward.h|sim/serving/replica*")
for spec in "${rooms[@]}"; do
  IFS='|' read -r room iface seam <<<"$spec"
  [[ -d "$root/$room" ]] || continue
  for layer in "${layers[@]}"; do
    [[ "$layer" != */* && -d "$root/$layer" ]] || continue  # (validate/ holds its sub-layers)
    while IFS=: read -r file line text; do
      rel="${file#"$root"/}"
      [[ "$rel" == "$room/"* ]] && continue  # inside the room
      target="${text#*\"}"
      target="${target%%\"*}"
      # shellcheck disable=SC2053  # $seam is a glob
      if [[ "$target" != "$iface" || "$rel" != $seam ]]; then
        echo "$rel:$line: $room/ is entered only through $iface, from $seam"
        bad=1
      fi
    done < <(grep -rnE --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' \
               "^[[:space:]]*#[[:space:]]*include[[:space:]]+\"$room/" "$root/$layer" || true)
  done
done
exit "$bad"
