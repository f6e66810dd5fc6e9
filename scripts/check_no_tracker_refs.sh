#!/usr/bin/env bash
# Code, comments, docs, scenarios and bench notes speak for themselves: nobody who clones the
# repository can read the project's tracker or its work sessions, so a reference to either
# (an issue or session by its number, "the issue" as a source of figures) says nothing to a reader. Say
# what the thing is and why instead; history belongs in commit messages.
# Checks every text file under ROOT (default: the repository): in a git checkout the files git
# tracks or would track, elsewhere every file but build folders.
# Prints one line per reference (file:line: text) and exits 1 if any.
set -euo pipefail
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"

# Tracker issues by number (the word, optionally plural, then a number, "#" or "-" between), the
# tracker issue as a source (its possessive, "as it says", "it saw"), and numbered work sessions.
pattern='\bissues?[ #-]*[0-9]+|\bthe issue(.s| says| saw| measured)\b|\bsession[ -][0-9]+|\bsessions [0-9]+ and'
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # In a checkout: the files git tracks or would track (generated, ignored ones are not the
  # project's text).
  hits="$(cd "$root" && git ls-files -z -co --exclude-standard |
          xargs -0 -r grep -InIiE "$pattern" -- 2>/dev/null || true)"
else
  hits="$(cd "$root" && grep -rInIiE "$pattern" . --exclude-dir='build*' --exclude-dir=.git \
            --exclude-dir=__pycache__ | sed 's|^\./||' || true)"
fi
if [[ -n "$hits" ]]; then
  echo "$hits"
  echo "check_no_tracker_refs: $(echo "$hits" | wc -l) reference(s) to tracker issues or work sessions above" >&2
  exit 1
fi
