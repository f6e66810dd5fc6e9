#!/usr/bin/env bash
# Front door 1: install what is missing, build, run the main job on the embedded default scenario
# (mixed-chat-docs), and render its figures and report. Extra arguments go to `kvsim run`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$KVSIM_ROOT"
"$KVSIM_BUILD/kvsim" run -o out/mixed-chat-docs --plot "$@"
