#!/usr/bin/env bash
# Checks that a bundle (validate/bundle.sh) is self-contained: every binary in BUNDLE/bin has
# RUNPATH $ORIGIN/../lib, and `ldd` in an empty environment resolves every library it loads
# either inside BUNDLE/lib or to an allowed system library (the C runtime and the NVIDIA driver);
# every library in BUNDLE/lib needs only allowed system libraries or others in BUNDLE/lib.
# Prints one line per problem and exits 1 if any (0 when clean). Runs on the GPU node too (the
# first step of run-on-gpu.sh), where it shows at once a library the node lacks.
#
# usage: validate/bundle-check.sh BUNDLE
set -uo pipefail
if [[ $# -ne 1 || ! -d $1/bin ]]; then
  echo "usage: bundle-check.sh BUNDLE (a folder with bin/ and lib/)" >&2
  exit 2
fi
B=$(cd "$1" && pwd -P)
# The C runtime (glibc: libc, libm, libmvec, libdl, libpthread, librt, the loader and the vDSO),
# the C++ runtime (libstdc++, libgcc_s) and the NVIDIA driver (libcuda, libnvidia-*).
ALLOWED='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libmvec\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libnvidia-)'
bad=0
problem() { echo "bundle-check: $*"; bad=1; }

shopt -s nullglob
# readelf (binutils) may be missing on a bare node: then only ldd's view is checked, and said so.
HAVE_READELF=1
command -v readelf >/dev/null || { HAVE_READELF=0; echo "bundle-check: readelf not found: RUNPATH and lib/ NEEDED entries not checked (ldd only)"; }
bins=("$B"/bin/*)
[[ ${#bins[@]} -gt 0 ]] || problem "no binaries in $B/bin"
for f in "${bins[@]}"; do
  [[ -f $f && -x $f ]] || continue
  name=${f#"$B"/}
  if [[ $HAVE_READELF -eq 1 ]]; then
    runpath=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
    [[ $runpath == '$ORIGIN/../lib' ]] || problem "$name: RUNPATH is '${runpath}', want '\$ORIGIN/../lib'"
    readelf -d "$f" 2>/dev/null | grep -q '(RPATH)' && problem "$name: has an old-style RPATH"
  fi
  out=$(env -i PATH=/usr/bin:/bin ldd "$f" 2>&1) || problem "$name: ldd failed: $out"
  while read -r line; do
    [[ -z $line ]] && continue
    lib=${line%% *}
    if [[ $line == *"not found"* ]]; then
      problem "$name: $lib not found"
    elif [[ $line == *" => "* ]]; then
      path=${line#* => }
      path=${path%% (*}
      real=$(readlink -f "$path" 2>/dev/null || echo "$path")
      if [[ $real == "$B"/lib/* ]]; then continue; fi
      [[ $lib =~ $ALLOWED ]] || problem "$name: $lib resolves outside the bundle, to $path"
    else
      lib=$(basename "$lib")
      [[ $lib =~ $ALLOWED ]] || problem "$name: unexpected ldd line: $line"
    fi
  done <<<"$out"
done
for f in "$B"/lib/*.so*; do
  [[ -f $f && $HAVE_READELF -eq 1 ]] || continue
  while read -r need; do
    [[ $need =~ $ALLOWED || -e $B/lib/$need ]] || problem "lib/$(basename "$f") needs $need, which is neither in lib/ nor an allowed system library"
  done < <(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
done
[[ $bad -eq 0 ]] && echo "bundle-check: ok: ${#bins[@]} binaries, $(find "$B/lib" -maxdepth 1 -name '*.so*' | wc -l) bundled libraries, nothing outside the bundle but the C runtime and the driver"
exit $bad
