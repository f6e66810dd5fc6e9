#!/usr/bin/env bash
# scripts/find_nvcc.sh: with no nvcc on PATH it takes $KVSIM_CUDA_HOME/bin/nvcc (by default
# /usr/local/cuda, where a GPU node keeps it), puts that folder on PATH, and kvsim_cuda_status
# says in one line whether CMake built the kernels. A fake toolkit in a temporary folder stands in.
set -euo pipefail
source "$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# No toolkit anywhere: nothing found, and the status line says where it looked.
PATH=/usr/bin:/bin KVSIM_CUDA_HOME="$tmp/none" kvsim_find_nvcc
[[ -z "$KVSIM_NVCC" ]] || fail "found $KVSIM_NVCC with no toolkit"
echo "-- kvsim: CUDA kernels OFF" >"$tmp/log"
line="$(KVSIM_CUDA_HOME="$tmp/none" kvsim_cuda_status "$tmp/log")"
[[ "$line" == *"not built: no nvcc on PATH or in $tmp/none/bin"* ]] || fail "status: $line"

# A toolkit off PATH: found in its bin/, and bin/ joins PATH so CMake's own search sees it too.
mkdir -p "$tmp/cuda/bin"
printf '#!/bin/sh\necho "Cuda compilation tools, release 13.0, V13.0.88"\n' >"$tmp/cuda/bin/nvcc"
chmod +x "$tmp/cuda/bin/nvcc"
PATH=/usr/bin:/bin
KVSIM_CUDA_HOME="$tmp/cuda" kvsim_find_nvcc
[[ "$KVSIM_NVCC" == "$tmp/cuda/bin/nvcc" ]] || fail "KVSIM_NVCC='$KVSIM_NVCC'"
[[ ":$PATH:" == *":$tmp/cuda/bin:"* ]] || fail "PATH lacks $tmp/cuda/bin: $PATH"
echo "-- kvsim: CUDA kernels ON" >"$tmp/log"
line="$(kvsim_cuda_status "$tmp/log")"
[[ "$line" == *"CUDA kernels built ($tmp/cuda/bin/nvcc, release 13.0; sm_80 and sm_90)"* ]] ||
  fail "status: $line"
echo "find_nvcc: ok"
