#!/usr/bin/env bash
# Installs what kvsim needs from Debian's packages, only when something is missing, and
# configures + builds a Release tree in build/. Sourced by run.sh and test.sh so both front-door
# commands share one set-up. Idempotent: a second call installs nothing and rebuilds only changes.
set -euo pipefail

KVSIM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KVSIM_BUILD="${KVSIM_BUILD:-$KVSIM_ROOT/build}"

# One package per capability; dpkg-query tells what is present without touching the network.
KVSIM_PACKAGES=(
  build-essential cmake pkg-config
  libyaml-cpp-dev libeigen3-dev libspdlog-dev libfmt-dev libboost-dev libopenmpi-dev openmpi-bin
  catch2 libcli11-dev nlohmann-json3-dev python3-matplotlib
  # The Python module (python/, docs/python.md): pybind11 and the headers of Debian's python3.
  pybind11-dev python3-pybind11 python3-dev
)
# Test-only packages, added only when scripts/test.sh sources this file (it sets
# KVSIM_WITH_TEST_PACKAGES=1): Chromium (~350 MB installed) loads `kvsim report`'s page headless;
# clang and its sanitizer and libFuzzer runtimes build the ASan + UBSan and fuzz stage; clang-format
# checks the house format (scripts/check_format.sh); GNU time
# (/usr/bin/time) times the bench smoke; pytest and pandas run the Python module's tests
# (tests/python/) and its DataFrames.
KVSIM_TEST_PACKAGES=(chromium clang clang-format libclang-rt-14-dev time python3-pytest python3-pandas)
if [[ "${KVSIM_WITH_TEST_PACKAGES:-0}" == 1 ]]; then KVSIM_PACKAGES+=("${KVSIM_TEST_PACKAGES[@]}"); fi

kvsim_missing_packages() {
  local missing=() p
  for p in "${KVSIM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  echo "${missing[@]:-}"
}

kvsim_install() {
  local missing
  missing="$(kvsim_missing_packages)"
  [[ -z "${missing// /}" ]] && return 0
  echo "kvsim setup: installing missing packages: $missing" >&2
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >/dev/null
  # shellcheck disable=SC2086
  $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

kvsim_build() {
  local jobs log
  jobs="$(nproc 2>/dev/null || echo 2)"
  log="$KVSIM_BUILD/build.log"
  mkdir -p "$KVSIM_BUILD"
  # ccache, when present, makes a rebuild in a second checkout (or after a clean) cheap. It
  # caches a unit that starts from a precompiled header (KVSIM_PCH) only with this sloppiness.
  local launcher=()
  command -v ccache >/dev/null &&
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros}"
  # The CUDA kernels build when nvcc is found (find_nvcc.sh: PATH, then /usr/local/cuda/bin).
  local cuda=()
  kvsim_find_nvcc
  [[ -n "$KVSIM_NVCC" ]] && cuda=(-DCMAKE_CUDA_COMPILER="$KVSIM_NVCC")
  # Quiet when all is well; the whole log when something fails.
  if ! { cmake -S "$KVSIM_ROOT" -B "$KVSIM_BUILD" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
           "${cuda[@]}" ${KVSIM_CMAKE_ARGS:-} &&
         cmake --build "$KVSIM_BUILD" -j "$jobs"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "kvsim setup: build failed (log: $log)" >&2
    return 1
  fi
  kvsim_cuda_status "$log" >&2
}

# shellcheck source=scripts/find_nvcc.sh
source "$KVSIM_ROOT/scripts/find_nvcc.sh"
kvsim_install
kvsim_build
