#!/usr/bin/env bash
# scripts/check_format.sh must be able to fail: in a temporary tree with the repository's
# .clang-format, a formatted file passes, and a file with a 120-column line and one with a
# misplaced brace are each named with the line where they first differ.
set -euo pipefail
check="$1" style="$2"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
cp "$style" "$tree/.clang-format"
mkdir -p "$tree/sim"
printf 'namespace kvsim {\n\nint twice(int x) { return 2 * x; }\n\n}  // namespace kvsim\n' >"$tree/sim/ok.cc"
bash "$check" "$tree" || { echo "FAIL: a formatted tree failed"; exit 1; }
printf 'namespace kvsim {\n\nint wide(int a, int b, int c) { return a + b + c + a + b + c + a + b + c + a + b + c + a + b + c + a + b; }\n\n}  // namespace kvsim\n' >"$tree/sim/wide.cc"
printf '#pragma once\n\nnamespace kvsim {\n\nstruct S\n{\n  int x;\n};\n\n}  // namespace kvsim\n' >"$tree/sim/brace.h"
if out="$(bash "$check" "$tree")"; then echo "FAIL: the planted files passed"; exit 1; fi
grep -q '^sim/wide.cc:3: not formatted' <<<"$out" || { echo "FAIL: wide.cc not named: $out"; exit 1; }
grep -q '^sim/brace.h:5: not formatted' <<<"$out" || { echo "FAIL: brace.h not named: $out"; exit 1; }
grep -q 'sim/ok.cc' <<<"$out" && { echo "FAIL: ok.cc named: $out"; exit 1; }
echo "PASS: both planted files were named"
