#!/usr/bin/env bash
# The tree's C++ and CUDA sources are formatted to .clang-format (Google, 100 columns): every
# tracked *.h, *.cc, *.cu and *.cuh under ROOT (default: the repository) is compared with what
# clang-format makes of it, and each file that differs is named with its first differing line.
# Runs as the ctest test kvsim_house_rules:the_tree_is_clang_formatted (planted_format.sh beside
# it proves it can fail). To format: clang-format -i FILE..., or scripts/check_format.sh --fix.
# The formatter is Debian 12's clang-format 14 (scripts/test.sh installs it); another major
# version formats some constructs differently, so the check names the version it ran.
set -euo pipefail
fix=0
if [[ ${1:-} == --fix ]]; then fix=1; shift; fi
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
command -v clang-format >/dev/null || { echo "check_format.sh: clang-format not found (scripts/test.sh installs it)" >&2; exit 2; }
cd "$root"
[[ -f .clang-format ]] || { echo "check_format.sh: no .clang-format in $root" >&2; exit 2; }
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.h' '*.cc' '*.cu' '*.cuh' | grep -v '^third_party/' || true)
else
  mapfile -t files < <(find . -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) \
                         -not -path './build*' | sed 's|^\./||' | sort)
fi
existing=()
for f in "${files[@]}"; do [[ -f $f ]] && existing+=("$f"); done
((${#existing[@]})) || exit 0
if ((fix)); then
  clang-format -i --style=file "${existing[@]}"
  exit 0
fi
# One clang-format process for the whole tree: --dry-run --Werror reports each place that differs
# as FILE:LINE:COL: error: ...; the first per file is enough to find it.
report=$(clang-format --dry-run --Werror --style=file "${existing[@]}" 2>&1 >/dev/null) && exit 0
grep -oE '^[^:[:space:]]+:[0-9]+:[0-9]+: error: code should be clang-formatted' <<<"$report" |
  awk -F: '!seen[$1]++ {printf "%s:%s: not formatted to .clang-format (clang-format -i %s)\n", $1, $2, $1}'
echo "($(clang-format --version | head -n1))"
exit 1
