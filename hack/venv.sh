#!/usr/bin/env bash
# Create or update a virtualenv with the pinned Python dependencies of one ansible-core line and
# its kubernetes.core collection, with progress on stderr. Quick (no pip at all) when it is up to
# date: the virtualenv records a key of its inputs (pyproject.toml, the line's constraints file,
# the collection installer, the line, the Python version) and is remade when one of them changes.
#
#   hack/venv.sh PYTHON DIR [LINE]     e.g. hack/venv.sh python3.13 .venv 2.18
#
# LINE is an ansible-core line of hack/lines.sh (default: its default line); a Python the line
# does not run on is refused with one line naming those it does.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
MIN=3.11 MAX=3.13

die() { echo "venv: $*" >&2; exit 1; }

check_inputs() { # the line, the Python (runs, is one the line runs on, has venv), the constraints
  "$here/lines.sh" check "$line" >/dev/null 2>&1 || die "$("$here/lines.sh" check "$line" 2>&1)"
  constraints=$repo/$("$here/lines.sh" constraints "$line")
  command -v "$python" >/dev/null 2>&1 ||
    die "no Python interpreter '$python' on PATH. Install Python $("$here/lines.sh" pythons "$line" | sed 's/ /, /g') (ansible-core $line's; e.g. apt-get install python3), or name one with PYTHON=/path/to/python3.x."
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])') ||
    die "'$python' does not run."
  "$python" -c "import sys; sys.exit(not ((${MIN/./, }) <= sys.version_info[:2] <= (${MAX/./, })))" ||
    die "'$python' is Python $version; operator-runner needs Python $MIN to $MAX. Name one with PYTHON=/path/to/python3.x."
  "$here/lines.sh" check "$line" "$version" >/dev/null 2>&1 ||
    die "'$python' is Python $version, $("$here/lines.sh" check "$line" "$version" 2>&1 | sed 's/^ansible-core/but ansible-core/')"
  "$python" -c 'import venv, ensurepip' 2>/dev/null ||
    die "'$python' (Python $version) lacks the venv module or ensurepip; on Debian or Ubuntu: apt-get install python$version-venv."
  [ -f "$constraints" ] || die "${constraints#"$repo"/} is missing; make it with: make lock ANSIBLE_CORE=$line"
}

up_to_date() { # the virtualenv was made from these very inputs
  [ -f "$venv/.stamp" ] && [ "$(cat "$venv/.stamp")" = "$key" ] && [ -x "$venv/bin/python" ]
}

make_venv() { # a virtualenv of $version at $venv (one of another Python is made anew)
  if [ -x "$venv/bin/python" ] && [ "$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" != "$version" ]; then
    echo "venv: $venv is of another Python; making it anew with Python $version" >&2
    rm -rf "$venv"
  fi
  rm -f "$venv/.stamp"
  if [ ! -x "$venv/bin/python" ]; then
    echo "venv: creating $venv with $(command -v "$python") (Python $version)" >&2
    "$python" -m venv "$venv"
  fi
}

pip_install() { # operator-runner with its pinned dependencies; pip's own lines (one per package
  # it collects and installs) are the progress, the rest of its output is kept in $venv/pip.log
  local log=$venv/pip.log count rc
  count=$(grep -cE '^[A-Za-z0-9]' "$constraints")
  echo "venv: installing operator-runner with ansible-core $line and its $count pinned dependencies into $venv (about a minute the first time) ..." >&2
  set +e
  "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
    -c "$constraints" -e "${repo}[dev]" "ansible-core~=$line.0" 2>&1 | tee "$log" |
    grep --line-buffered -E '^(Collecting|Successfully installed|ERROR|WARNING: Retrying)' | cut -c1-100 >&2
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" = 0 ] && return 0
  tail -n 15 "$log" >&2
  if grep -qiE 'No space left on device' "$log"; then
    die "the disk is full (df -h $venv); free some space and run 'make venv' again."
  elif grep -qiE 'Could not find a version|NewConnectionError|Max retries exceeded|Temporary failure in name resolution' "$log"; then
    die "pip could not reach the package index (PyPI, or PIP_INDEX_URL); check the network and run 'make venv' again. Full log: $log"
  fi
  die "pip failed (exit $rc); full log: $log"
}

main() {
  python=${1:?usage: hack/venv.sh PYTHON DIR [LINE]}
  venv=${2:?usage: hack/venv.sh PYTHON DIR [LINE]}
  line=${3:-$("$here/lines.sh" default)}
  check_inputs
  key=$(cat "$repo/pyproject.toml" "$constraints" "$repo/hack/install_collections.py" "$repo/runner/util/lines.txt" |
    sha256sum | cut -c1-16)-ansible-core-$line-$version
  up_to_date && return 0
  local start=$SECONDS
  make_venv
  pip_install
  echo "venv: installing the kubernetes.core collection (from the ansible $("$venv/bin/python" "$here/install_collections.py" --line "$line" --print-version) wheel) ..." >&2
  "$venv/bin/python" "$here/install_collections.py" --line "$line"
  echo "$key" >"$venv/.stamp"
  echo "venv: $venv ready (Python $version, ansible-core $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("ansible-core"))')) in $((SECONDS - start)) s" >&2
}

main "$@"
