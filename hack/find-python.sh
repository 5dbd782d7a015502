#!/usr/bin/env bash
# Print the path of a working Python interpreter of each VERSION asked for (default: the newest
# supported one), one a line; nothing (and exit 1) when none is found.
#
#   hack/find-python.sh            the newest of 3.13, 3.12, 3.11
#   hack/find-python.sh --all      every supported version found, newest first
#   hack/find-python.sh 3.12 3.11  the first of these found (hack/lines.sh: a line's Pythons)
#
# Looks for python3.X on PATH (one that really runs: a pyenv shim of a version that is installed
# but not selected does not), then in pyenv's versions folder.
set -uo pipefail

SUPPORTED="3.13 3.12 3.11"

find_one() { # find_one 3.X: print a working interpreter of that version
  local v=$1 candidate
  for candidate in "$(command -v "python$v" 2>/dev/null)" \
    "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/"$v"*/bin/"python$v"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    if "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$v'.split('.'))))" 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

all=
if [ "${1:-}" = "--all" ]; then
  all=1; shift
fi
[ $# -gt 0 ] && SUPPORTED="$*"
found=1
for v in $SUPPORTED; do
  if find_one "$v"; then
    found=0
    [ -n "$all" ] || exit 0
  fi
done
exit $found
