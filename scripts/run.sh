#!/usr/bin/env bash
# Front door 1: install what is missing, build, run the main job on the embedded default scenario.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
"$KVSIM_BUILD/kvsim" run "$@"
