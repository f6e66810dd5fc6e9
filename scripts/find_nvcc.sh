#!/usr/bin/env bash
# Finds nvcc for the CUDA kernels' build. Sourced by setup.sh (and its test). A GPU node usually
# keeps the toolkit in /usr/local/cuda/bin, off PATH; validate/run-on-gpu.sh looks there too.
# KVSIM_CUDA_HOME names another toolkit root. Sets KVSIM_NVCC to nvcc's path ("" when none) and
# puts its folder on PATH.
kvsim_find_nvcc() {
  KVSIM_NVCC="$(command -v nvcc 2>/dev/null || true)"
  local home="${KVSIM_CUDA_HOME:-/usr/local/cuda}"
  if [[ -z "$KVSIM_NVCC" && -x "$home/bin/nvcc" ]]; then
    KVSIM_NVCC="$home/bin/nvcc"
    export PATH="$PATH:$home/bin"
  fi
}

# One line: whether the build whose CMake log is $1 built the kernels (CMake prints
# "kvsim: CUDA kernels ON|OFF"), and why not.
kvsim_cuda_status() {
  if grep -q 'kvsim: CUDA kernels ON' "$1" 2>/dev/null; then
    echo "kvsim setup: CUDA kernels built ($KVSIM_NVCC, $("$KVSIM_NVCC" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -n 1); sm_80 and sm_90)"
  elif [[ -n "$KVSIM_NVCC" ]]; then
    echo "kvsim setup: CUDA kernels not built: CMake did not take $KVSIM_NVCC (see $1); their tests show as Skipped"
  else
    echo "kvsim setup: CUDA kernels not built: no nvcc on PATH or in ${KVSIM_CUDA_HOME:-/usr/local/cuda}/bin; their tests show as Skipped"
  fi
}
