#!/usr/bin/env bash
# docs/architecture.md stays true to the code where a check is cheap:
#   1. every repository path it names in backticks exists;
#   2. the scheduler contract suite's variant count (kVariants in
#      tests/contract/scheduler_contract_test.cc) is the number it states;
#   3. the fast-forward identity test's scenario count (GENERATE(range(0, N)) in
#      tests/engine/invariants_test.cc) is the number it states;
#   4. the file it says writes the result files writes them (summary.json, summary.csv and,
#      last, manifest.json in sim/run/run_outputs.cc, which simulate() calls).
# ROOT defaults to the repository. Prints one line per mismatch and exits 1 if any.
set -euo pipefail
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
doc="$root/docs/architecture.md"
bad=0
say() { echo "docs/architecture.md: $*"; bad=1; }

# 1. Paths: backticked tokens under a top-level folder of the repository, but the how-to's
# examples of new files (my_guard.cc, ...) and sim/cli/ (named as where the programs are not).
while read -r path; do
  [[ "$path" == *my_* || "$path" == sim/cli/ ]] && continue
  [[ -e "$root/$path" ]] || say "names \`$path\`, which does not exist"
done < <(grep -o '`[^`]*`' "$doc" | tr -d '`' |
         grep -E '^(core|models|workloads|kernels|sim|validate|apps|python|scripts|tests|bench|docs|scenarios)/[A-Za-z0-9_./-]*$' |
         sort -u)

words=(zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
       fifteen sixteen seventeen eighteen nineteen twenty)

# 2. Scheduler contract variants: the entries of kVariants, one per line starting with {".
suite="$root/tests/contract/scheduler_contract_test.cc"
n=$(sed -n '/^const Variant kVariants\[\] = {/,/^};/p' "$suite" | grep -c '^ *{"' || true)
if (( n == 0 )); then
  say "cannot count kVariants in tests/contract/scheduler_contract_test.cc"
elif ! grep -Eq "on (${words[$n]:-$n}|$n) engine variants" "$doc"; then
  say "the scheduler contract suite has $n engine variants; the doc does not say \"on ${words[$n]:-$n} engine variants\""
fi

# 3. The identity test's random scenarios.
inv="$root/tests/engine/invariants_test.cc"
m=$(sed -n '/TEST_CASE("fast-forward and stepping write identical result files"/,/^}/p' "$inv" |
    grep -o 'GENERATE(range(0, [0-9]*))' | grep -o '[0-9]*))' | tr -d ')' || true)
if [[ -z "$m" ]]; then
  say "cannot find the identity test's seed range in tests/engine/invariants_test.cc"
elif ! grep -Eq "checks that $m$|checks that $m " "$doc"; then
  say "the identity test runs $m random scenarios; the doc does not say \"checks that $m\""
fi

# 4. Who writes the result files.
runner="$root/sim/run/run_outputs.cc"
grep -q 'write_run_outputs()` (`sim/run/run_outputs.cc`)' "$doc" ||
  say "does not name write_run_outputs() in sim/run/run_outputs.cc as the writer of the result files"
grep -q 'write_run_outputs(' "$root/sim/run/scenario_runner.cc" ||
  say "says simulate() hands the files to write_run_outputs(), which sim/run/scenario_runner.cc does not call"
for f in summary.csv summary.json manifest.json; do
  grep -q "write_file_atomic(dir / \"$f\"" "$runner" ||
    say "says sim/run/run_outputs.cc writes $f, which it does not"
done
last=$(grep -o 'write_file_atomic(dir / "[a-z.]*"' "$runner" | tail -1)
[[ "$last" == *manifest.json* ]] || say "says manifest.json is written last; the runner's last write is $last"

exit "$bad"
