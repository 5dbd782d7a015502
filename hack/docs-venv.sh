#!/usr/bin/env bash
# Create or update the docs site's virtualenv: mkdocs with the material theme, at the exact
# versions of docs/requirements.txt, apart from the ansible-core lines' virtualenvs and their
# constraints. Quick (no pip at all) when it is up to date: the virtualenv records a key of its
# inputs (docs/requirements.txt, the Python version) and is remade when one of them changes.
#
#   hack/docs-venv.sh PYTHON DIR     e.g. hack/docs-venv.sh python3.13 .venv-docs
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
requirements=$repo/docs/requirements.txt

die() { echo "docs-venv: $*" >&2; exit 1; }

main() {
  local python=${1:?usage: hack/docs-venv.sh PYTHON DIR} venv=${2:?usage: hack/docs-venv.sh PYTHON DIR}
  local version key log rc start=$SECONDS
  command -v "$python" >/dev/null 2>&1 ||
    die "no Python interpreter '$python'; name one with PYTHON=/path/to/python3.x."
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])') ||
    die "'$python' does not run."
  "$python" -c 'import venv, ensurepip' 2>/dev/null ||
    die "'$python' (Python $version) lacks the venv module or ensurepip; on Debian or Ubuntu: apt-get install python$version-venv."
  key=$(sha256sum <"$requirements" | cut -c1-16)-python-$version
  if [ -f "$venv/.stamp" ] && [ "$(cat "$venv/.stamp")" = "$key" ] && [ -x "$venv/bin/mkdocs" ]; then
    return 0
  fi
  rm -rf "$venv"
  echo "docs-venv: creating $venv with $(command -v "$python") (Python $version): mkdocs and the material theme, pinned in docs/requirements.txt ..." >&2
  "$python" -m venv "$venv"
  log=$venv/pip.log
  set +e
  "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off --no-deps \
    -r "$requirements" >"$log" 2>&1
  rc=$?
  [ "$rc" != 0 ] || "$venv/bin/python" -m pip check >>"$log" 2>&1 || rc=$? # no dependency left out
  set -e
  if [ "$rc" != 0 ]; then
    tail -n 15 "$log" >&2
    die "pip failed (exit $rc); full log: $log"
  fi
  echo "$key" >"$venv/.stamp"
  echo "docs-venv: $venv ready (mkdocs $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mkdocs"))'), mkdocs-material $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mkdocs-material"))')) in $((SECONDS - start)) s" >&2
}

main "$@"
