#!/usr/bin/env bash
# scripts/check_code_size.py must be able to fail. In a temporary tree: an 81-line function (its
# signature on two lines, a lambda and a braced initializer inside), a constructor whose
# initializer list holds braces and lambdas, a template, and a 451-line file must each be named;
# an allowlist entry that has grown, one that is now within budget and one for a function that is
# gone must each be named; the exact allowlist passes; an 80-line function passes.
set -euo pipefail
check="$1"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/sim" "$tree/models" "$tree/scripts"
expect() {  # expect WHAT PATTERN...: the check fails, printing one line per pattern, each found
  local what="$1" out
  shift
  if out="$(/usr/bin/python3 "$check" "$tree")"; then echo "FAIL: $what passed"; exit 1; fi
  local p
  for p in "$@"; do grep -q -- "$p" <<<"$out" || { echo "FAIL: $what: no '$p' in: $out"; exit 1; }; done
  [[ "$(wc -l <<<"$out")" -eq $# ]] || { echo "FAIL: $what: expected $# lines: $out"; exit 1; }
}
body() {  # body N: N lines of statements
  local i
  for ((i = 0; i < $1; ++i)); do echo "  total += $i;  // a { brace in a comment"; done
}
{ # long_one: 2 signature lines + 1 (lambda) + 1 (init) + 76 + the closing brace = 81 lines.
  printf 'namespace kvsim {\nint long_one(int a,\n             int b) {\n'
  printf '  auto f = [](int x) { return x; };\n  int total{f(a) + b};\n'
  body 75
  printf '  return total;\n}\n'
  # within: 1 signature line + 78 + the closing brace = 80 lines.
  printf 'int within(const char* s) noexcept {\n  int total = "}{"[0];\n'
  body 76
  printf '  return total;\n}\n}  // namespace kvsim\n'
} >"$tree/sim/a.cc"
{ # Holder::Holder: 3 lines of signature and initializers, 78 lines of body, the brace = 82.
  printf 'struct Holder {\n  Holder(int a);\n  int x_;\n  std::function<int()> f_;\n};\n'
  printf 'template <class T>\nT twice(T t) {\n  return t + t;\n}\n'
  printf 'Holder::Holder(int a)\n    : x_{a},\n      f_([this] { return x_; }) {\n  int total = 0;\n'
  body 77
  printf '}\n'
} >"$tree/models/b.cc"
for ((i = 0; i < 451; ++i)); do echo "// line $i"; done >"$tree/models/big.h"
expect "the planted offenders" '^sim/a.cc:2: function long_one is 81 lines' \
  '^models/b.cc:10: function Holder::Holder is 82 lines' '^models/big.h:1: file is 451 lines'

allow="$tree/scripts/code_size_allowlist.txt"
printf 'function sim/a.cc long_one 81\nfunction models/b.cc Holder::Holder 82\nfile models/big.h 451\n' >"$allow"
/usr/bin/python3 "$check" "$tree" >/dev/null || { echo "FAIL: the exact allowlist failed"; exit 1; }

printf 'function sim/a.cc long_one 80\nfunction models/b.cc Holder::Holder 84\nfile models/big.h 451\nfunction sim/gone.cc gone 90\n' >"$allow"
expect "the stale allowlist" 'long_one grew to 81 lines' 'Holder::Holder in models/b.cc is now 82 lines' \
  'function sim/gone.cc gone is within its budget now'
echo "PASS: every planted case was named"
