#!/usr/bin/env bash
# The ansible-core lines operator-runner supports, and the Pythons each one runs on (among the
# project's 3.11-3.13, as ansible-core's own control-node support matrix says). One place: the
# Makefile, hack/venv.sh, hack/lock.sh and hack/test.sh read it here. Each line's `ansible`
# community package (where kubernetes.core comes from) is in hack/install_collections.py, its
# exact versions in constraints/ansible-core-<line>.txt.
#
#   hack/lines.sh default            the default line (2.18)
#   hack/lines.sh list               every line, oldest first
#   hack/lines.sh pythons LINE       the Python versions LINE supports, newest first
#   hack/lines.sh check LINE [PY]    exit 1 with one line naming the supported ones when LINE is
#                                    not a line here, or (with PY, e.g. 3.11) LINE does not run on PY
#   hack/lines.sh python LINE        the newest Python LINE supports that is found on this machine
#   hack/lines.sh venv LINE          its virtualenv folder: .venv for the default, else .venv-ansible-LINE
#   hack/lines.sh constraints LINE   constraints/ansible-core-LINE.txt
#   hack/lines.sh debian LINE        the Debian suite of the line's image (hack/image.sh's debootstrap
#                                    base), whose python3 the line runs on
#   hack/lines.sh python-image LINE  the Python image of the line's image in docker builds
#                                    (images/operator-runner/Dockerfile's PYTHON_IMAGE): the same
#                                    Python on the same Debian, python:3.X-slim-SUITE
set -euo pipefail

# The default: the line today's operator-sdk images (ansible-operator-plugins v1.37 and later)
# ship, so that a project moved over runs its roles unmodified; it runs on all three Pythons.
DEFAULT=2.18
# line: Pythons, newest first
declare -A PYTHONS=(
  [2.15]="3.11"
  [2.16]="3.12 3.11"
  [2.17]="3.12 3.11"
  [2.18]="3.13 3.12 3.11"
  [2.19]="3.13 3.12 3.11"
  [2.20]="3.13 3.12"
  [2.21]="3.13 3.12"
)
LINES="2.15 2.16 2.17 2.18 2.19 2.20 2.21"
# The image's Debian: its python3 must be one the line runs on. Bookworm's is 3.11 (every line up
# to 2.19 runs on it; the default line's image stays what it was); trixie's is 3.13, for 2.20 and
# 2.21, which do not run on 3.11.
declare -A DEBIAN=([2.15]=bookworm [2.16]=bookworm [2.17]=bookworm [2.18]=bookworm [2.19]=bookworm
  [2.20]=trixie [2.21]=trixie)
declare -A DEBIAN_PYTHON=([bookworm]=3.11 [trixie]=3.13)

here=$(cd "$(dirname "$0")" && pwd)

die() { echo "$*" >&2; exit 1; }

check() { # check LINE [PY]
  local line=$1 py=${2:-}
  [ -n "${PYTHONS[$line]+x}" ] ||
    die "ANSIBLE_CORE=$line is not an ansible-core line operator-runner supports; the lines are: ${LINES// /, } (default $DEFAULT)."
  if [ -n "$py" ] && ! [[ " ${PYTHONS[$line]} " == *" $py "* ]]; then
    die "ansible-core $line does not run on Python $py; it runs on Python ${PYTHONS[$line]// /, } (name one with PYTHON=/path/to/python3.x, or pick another line with ANSIBLE_CORE=...)."
  fi
  return 0
}

case "${1:-}" in
  default) echo "$DEFAULT" ;;
  list) echo "$LINES" ;;
  pythons) check "${2:?usage: hack/lines.sh pythons LINE}"; echo "${PYTHONS[$2]}" ;;
  check) check "${2:?usage: hack/lines.sh check LINE [PYTHON_VERSION]}" "${3:-}" ;;
  python)
    check "${2:?usage: hack/lines.sh python LINE}"
    read -r -a pythons <<<"${PYTHONS[$2]}"
    "$here/find-python.sh" "${pythons[@]}" ||
      die "no Python for ansible-core $2 found: it runs on Python ${PYTHONS[$2]// /, } (on PATH or in pyenv's versions folder); install one, or name it with PYTHON=/path/to/python3.x."
    ;;
  venv) check "${2:?usage: hack/lines.sh venv LINE}"; [ "$2" = "$DEFAULT" ] && echo .venv || echo ".venv-ansible-$2" ;;
  constraints) check "${2:?usage: hack/lines.sh constraints LINE}"; echo "constraints/ansible-core-$2.txt" ;;
  debian) check "${2:?usage: hack/lines.sh debian LINE}"; echo "${DEBIAN[$2]}" ;;
  python-image)
    check "${2:?usage: hack/lines.sh python-image LINE}"
    echo "python:${DEBIAN_PYTHON[${DEBIAN[$2]}]}-slim-${DEBIAN[$2]}"
    ;;
  *) die "usage: hack/lines.sh default|list|pythons LINE|check LINE [PY]|python LINE|venv LINE|constraints LINE|debian LINE|python-image LINE" ;;
esac
