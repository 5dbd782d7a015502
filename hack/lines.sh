#!/usr/bin/env bash
# The ansible-core lines operator-runner supports, and the Pythons each one runs on (among the
# project's 3.11-3.13, as ansible-core's own control-node support matrix says), read from the one
# list, runner/util/lines.txt (its `ansible` community release, kubernetes.core and Debian suite
# are there too). The Makefile, hack/venv.sh, hack/lock.sh, hack/test.sh and hack/image.sh ask here;
# each line's exact versions are in constraints/ansible-core-<line>.txt.
#
#   hack/lines.sh default            the default line (2.18)
#   hack/lines.sh list               every line, oldest first
#   hack/lines.sh ends               the oldest and the newest line (make test's LINES_FULL)
#   hack/lines.sh pythons LINE       the Python versions LINE supports, newest first
#   hack/lines.sh check LINE [PY]    exit 1 with one line naming the supported ones when LINE is
#                                    not a line here, or (with PY, e.g. 3.11) LINE does not run on PY
#   hack/lines.sh python LINE        the newest Python LINE supports that is found on this machine
#   hack/lines.sh venv LINE          its virtualenv folder: .venv for the default, else .venv-ansible-LINE
#   hack/lines.sh constraints LINE   constraints/ansible-core-LINE.txt
#   hack/lines.sh debian LINE        the Debian suite of the line's image (hack/image.sh's debootstrap
#                                    base), whose python3 the line runs on
#   hack/lines.sh python-image LINE  the base of the line's image in docker builds
#                                    (images/operator-runner/Dockerfile's PYTHON_IMAGE): the same
#                                    Debian as the debootstrap base, debian:SUITE-slim, with its
#                                    python3 from apt
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
TABLE=$here/../runner/util/lines.txt
[ -r "$TABLE" ] || { echo "hack/lines.sh: $TABLE is missing" >&2; exit 1; }

# row KIND: the rows of that kind, comments stripped
row() { sed 's/#.*//' "$TABLE" | awk -v kind="$1" '$1 == kind'; }
DEFAULT=$(row default | awk '{print $2}')
LINES=$(row line | awk '{print $2}' | paste -sd' ' -)
declare -A PYTHONS=() DEBIAN=()
while read -r _ line pythons _ _ _ suite; do
  PYTHONS[$line]=${pythons//,/ }
  DEBIAN[$line]=$suite
done < <(row line)

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
  ends) read -r -a all <<<"$LINES"; echo "${all[0]} ${all[-1]}" ;;
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
    echo "debian:${DEBIAN[$2]}-slim"
    ;;
  *) die "usage: hack/lines.sh default|list|ends|pythons LINE|check LINE [PY]|python LINE|venv LINE|constraints LINE|debian LINE|python-image LINE" ;;
esac
