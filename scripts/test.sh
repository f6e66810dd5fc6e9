#!/usr/bin/env bash
# Front door 2: install what is missing, build, run every test through ctest.
set -euo pipefail
KVSIM_WITH_TEST_PACKAGES=1  # setup.sh also installs the test-only packages (Chromium)
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$KVSIM_BUILD"
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
