#!/usr/bin/env bash
# Builds, on a CPU machine with nvcc, a self-contained folder that runs the hardware validation
# on a bare GPU node (CUDA driver, no kvsim libraries, no network, no apt):
#   DIR/bin/      kvsim-validate, kvsim_kernels_tests, kvsim_replay_cuda_tests (the CUDA forward
#                 pass against its reference), kvsim (stripped; RUNPATH $ORIGIN/../lib)
#   DIR/lib/      every shared library they load that is not the C/C++ runtime or the driver
#   DIR/lib/compat/  this machine's libstdc++ and libgcc_s, for a node whose own are too old
#   DIR/share/kvsim/  the catalogs and profiles (models/catalog), scenarios (among them
#                     replay-gpu-llama3-8b.yaml, run-on-gpu.sh's end-to-end step), validate/grids
#   DIR/run-on-gpu.sh, DIR/bundle-check.sh, DIR/MANIFEST.txt, DIR/SHA256SUMS
# CUDA: the runtime linked statically, kernels for sm_80 and sm_90 (SASS + PTX), cuBLAS and
# cuBLASLt opened at run time from the node's toolkit (KVSIM_STATIC_CUDA, kernels/cublas_dlopen.cc):
# this toolkit has no static cuBLAS and its shared cuBLASLt alone is ~540 MB.
#
# usage: validate/bundle.sh [--reduced] DIR
#   --reduced   kvsim-validate only, without CUDA (the CI test's bundle: minutes less to build)
# Environment: KVSIM_BUNDLE_BUILD (build folder; default build-bundle[-reduced]/ in the
# repository), JOBS (default 2). Uses ccache and ninja when present. DIR is replaced if it holds
# an earlier bundle (MANIFEST.txt) or is empty; any other existing folder is refused.
set -euo pipefail

REDUCED=0
if [[ ${1:-} == --reduced ]]; then REDUCED=1; shift; fi
if [[ $# -ne 1 ]]; then
  echo "usage: validate/bundle.sh [--reduced] DIR" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$1
JOBS=${JOBS:-2}
START=$SECONDS
say() { printf '[bundle %4ds] %s\n' $((SECONDS - START)) "$*"; }

if [[ -e $DIR ]]; then
  if [[ -f $DIR/MANIFEST.txt || -z $(ls -A "$DIR") ]]; then
    rm -rf "$DIR"
  else
    echo "bundle: $DIR exists and is not a bundle (no MANIFEST.txt); not replacing it" >&2
    exit 2
  fi
fi

# ---- build ---------------------------------------------------------------------------------------
args=(-DCMAKE_BUILD_TYPE=Release -DKVSIM_WITH_MPI=OFF -DKVSIM_BUILD_BENCH=OFF -DKVSIM_BUILD_PYTHON=OFF
      -DKVSIM_BUILD_TESTS=ON
      # RUNPATH (not RPATH) $ORIGIN/../lib on every binary, in the build tree already.
      -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON "-DCMAKE_INSTALL_RPATH=\$ORIGIN/../lib"
      -DCMAKE_EXE_LINKER_FLAGS=-Wl,--enable-new-dtags
      # No fallback to this source tree: the binaries find data in <exe>/../share/kvsim only
      # (or $KVSIM_DATA_DIR), so a file missing from the bundle fails here, not on the node.
      -DKVSIM_SOURCE_DATA_DIR=/nonexistent/kvsim-bundle-has-no-source-tree)
if [[ $REDUCED -eq 1 ]]; then
  BUILD=${KVSIM_BUNDLE_BUILD:-$ROOT/build-bundle-reduced}
  # Unoptimized: the reduced bundle proves the packaging (libraries, RUNPATH, data, scripts), not
  # speed, and at -O0 it builds in about half the CPU time of -O3.
  args+=(-DKVSIM_WITH_CUDA=OFF -DKVSIM_BUILD_TESTS=OFF "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG")
  targets=(kvsim-validate)
else
  NVCC=$(command -v nvcc || true)
  [[ -z $NVCC && -x /usr/local/cuda/bin/nvcc ]] && NVCC=/usr/local/cuda/bin/nvcc
  if [[ -z $NVCC ]]; then
    echo "bundle: nvcc not found (PATH, /usr/local/cuda/bin); the full bundle needs it (--reduced does not)" >&2
    exit 3
  fi
  BUILD=${KVSIM_BUNDLE_BUILD:-$ROOT/build-bundle}
  args+=(-DKVSIM_WITH_CUDA=ON -DKVSIM_STATIC_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=80;90"
         -DCMAKE_CUDA_COMPILER="$NVCC")
  targets=(kvsim-validate kvsim_kernels_tests kvsim_replay_cuda_tests kvsim)
fi
if command -v ccache >/dev/null; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
if [[ ! -f $BUILD/CMakeCache.txt ]] && command -v ninja >/dev/null; then args+=(-G Ninja); fi

say "configure $BUILD"
mkdir -p "$BUILD"
if ! cmake -S "$ROOT" -B "$BUILD" "${args[@]}" >"$BUILD/bundle-configure.log" 2>&1; then
  cat "$BUILD/bundle-configure.log" >&2
  exit 3
fi
if [[ $REDUCED -eq 0 ]] && ! grep -q "kvsim: CUDA kernels ON" "$BUILD/bundle-configure.log"; then
  echo "bundle: CMake did not enable CUDA (see $BUILD/bundle-configure.log)" >&2
  exit 3
fi
say "build ${targets[*]} (-j$JOBS)"
if ! cmake --build "$BUILD" -j "$JOBS" -t "${targets[@]}" >"$BUILD/bundle-build.log" 2>&1; then
  tail -n 60 "$BUILD/bundle-build.log" >&2
  exit 3
fi

# ---- assemble -----------------------------------------------------------------------------------
say "assemble $DIR"
mkdir -p "$DIR/bin" "$DIR/lib" "$DIR/share/kvsim/models" "$DIR/share/kvsim/validate"
DIR=$(cd "$DIR" && pwd)
install -m 755 "$BUILD/kvsim-validate" "$DIR/bin/"
if [[ $REDUCED -eq 0 ]]; then
  install -m 755 "$BUILD/kvsim" "$BUILD/tests/kernels/kvsim_kernels_tests" \
    "$BUILD/tests/replay_cuda/kvsim_replay_cuda_tests" "$DIR/bin/"
fi
strip --strip-unneeded "$DIR"/bin/*

# Libraries: what ldd resolves, minus the C/C++ runtime and the driver (bundle-check.sh's list).
ALLOWED='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libmvec\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libnvidia-)'
for f in "$DIR"/bin/*; do
  while read -r lib _ path _; do
    [[ -n ${path:-} && $path == /* ]] || continue
    [[ $lib =~ $ALLOWED ]] && continue
    [[ -e $DIR/lib/$lib ]] || install -m 644 "$(readlink -f "$path")" "$DIR/lib/$lib"
  done < <(env -i PATH=/usr/bin:/bin ldd "$f" | grep ' => ')
done
# lib/compat/: this machine's C++ runtime, NOT on the RUNPATH. run-on-gpu.sh puts it on
# LD_LIBRARY_PATH only when the node's libstdc++ is older than the binaries need.
mkdir -p "$DIR/lib/compat"
while read -r lib _ path _; do
  [[ $lib == libstdc++.so.* || $lib == libgcc_s.so.* ]] && install -m 644 "$(readlink -f "$path")" "$DIR/lib/compat/$lib"
done < <(env -i PATH=/usr/bin:/bin ldd "$DIR/bin/kvsim-validate" | grep ' => ')
strip --strip-unneeded "$DIR"/lib/*.so* "$DIR"/lib/compat/*

# Data: what data_dir() looks for next to the binaries (<exe>/../share/kvsim), and the grids.
cp -r "$ROOT/models/catalog" "$DIR/share/kvsim/models/"
cp -r "$ROOT/scenarios" "$DIR/share/kvsim/"
cp -r "$ROOT/validate/grids" "$DIR/share/kvsim/validate/"
install -m 755 "$ROOT/validate/run-on-gpu.sh" "$ROOT/validate/bundle-check.sh" "$DIR/"
# run-on-gpu.sh's end-to-end step replays this scenario (with the catalogs above).
if [[ ! -f $DIR/share/kvsim/scenarios/replay-gpu-llama3-8b.yaml ]]; then
  echo "bundle: scenarios/replay-gpu-llama3-8b.yaml is missing (run-on-gpu.sh's e2e step needs it)" >&2
  exit 3
fi

# ---- manifest -----------------------------------------------------------------------------------
# The newest symbol versions the binaries and libraries ask of glibc and libstdc++: the node's
# must be at least these (run-on-gpu.sh compares).
max_version() {  # PREFIX: the highest PREFIX_x.y.z among the bundle's dynamic symbol references
  objdump -T "$DIR"/bin/* "$DIR"/lib/*.so* 2>/dev/null | grep -o "$1_[0-9][0-9.]*" | sed "s/^$1_//" |
    sort -t. -k1,1n -k2,2n -k3,3n | tail -n 1
}
commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
[[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]] && commit+="-dirty"
toolkit=$( { [[ $REDUCED -eq 0 ]] && "$NVCC" --version | grep -o 'release [0-9.]*, V[0-9.]*'; } || echo "none (reduced bundle, no CUDA)")
glibc_built=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
libstdcxx_built=$(readlink -f "$(g++ -print-file-name=libstdc++.so.6 2>/dev/null)" | sed 's/.*libstdc++\.so\.//')
{
  echo "kvsim bundle (validate/bundle.sh)"
  echo "kind: $([[ $REDUCED -eq 1 ]] && echo 'reduced: kvsim-validate only, no CUDA, unoptimized' || echo full)"
  echo "kvsim_version: $("$DIR/bin/kvsim-validate" --version 2>/dev/null | awk '{print $2}')"
  echo "git_commit: $commit"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m) $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "cuda_toolkit: $toolkit"
  if [[ $REDUCED -eq 0 ]]; then
    echo "cuda_architectures: sm_80 sm_90 (SASS + PTX)"
    echo "cuda_runtime: static (libcudart_static); needs an NVIDIA driver at least as new as the toolkit (CUDA 13.0: driver >= 580)"
    echo "cublas: opened at run time: libcublas.so.13 + libcublasLt.so.13 from \$KVSIM_CUBLAS_DIR, the loader path, \$CUDA_HOME/lib64 or /usr/local/cuda/lib64 (not in the bundle)"
  fi
  echo "glibc_required: $(max_version GLIBC) (built with $glibc_built)"
  echo "libstdcxx_required: GLIBCXX_$(max_version GLIBCXX), CXXABI_$(max_version CXXABI) (built with libstdc++.so.$libstdcxx_built)"
  echo "binaries: $(cd "$DIR/bin" && ls | tr '\n' ' ')"
  echo "libraries: $(cd "$DIR/lib" && ls -p | grep -v / | tr '\n' ' ')"
  echo "compat: lib/compat/ ($(cd "$DIR/lib/compat" && ls | tr '\n' ' ')) is this machine's C++ runtime, used by run-on-gpu.sh only if the node's libstdc++ lacks libstdcxx_required"
} >"$DIR/MANIFEST.txt"
(cd "$DIR" && find . -type f ! -name SHA256SUMS | sort | xargs sha256sum >SHA256SUMS)

say "check"
"$DIR/bundle-check.sh" "$DIR"
size=$(du -sb "$DIR" | awk '{print $1}')
say "bundle $DIR: $size bytes ($(du -sh "$DIR" | awk '{print $1}'): bin $(du -sh "$DIR/bin" | awk '{print $1}'), lib $(du -sh "$DIR/lib" | awk '{print $1}'), share $(du -sh "$DIR/share" | awk '{print $1}'))"
if [[ $size -gt $((48 * 1024 * 1024)) ]]; then
  echo "bundle: $size bytes is over the 48 MiB budget (the device tool carries 64 MiB with the working tree)" >&2
  exit 1
fi
