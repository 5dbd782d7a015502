#!/usr/bin/env bash
# `make test`: everything CI runs, in steps that each say what they do and how long they took.
#
#   1. .venv with $PYTHON (the newest supported Python found, or PYTHON=...)
#   2. lint: ruff, mypy
#   3. the other supported Pythons found (PATH, pyenv): their own virtualenv, unit tests and mypy,
#      in the background beside steps 4 and 5 (their log is shown at the end)
#   4. the local control plane's binaries (built once per machine, before any test starts); as
#      root, the images (hack/image.sh, cached by content hash): the base image, the seeds' image
#      and tests/integration/sdk-operator's, FROM it, that tests/integration/test_image.py runs
#      and test_real_node.py deploys; where the machine can host a real node, its packages,
#      kubelet/kube-proxy and images (tests/integration/test_real_node.py then must pass)
#   5. one throwaway local cluster for the rest of the run (or $OPERATOR_RUNNER_KUBECONFIG):
#      pytest (unit and integration tests), molecule syntax check, molecule scenario `default`
#
# Arguments are passed to pytest (e.g. hack/test.sh -k reconcile).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
cd "$repo"
PYTHON=${PYTHON:-$(hack/find-python.sh || echo python3)}
MAKE=${MAKE:-make}
BIN=.venv/bin

run_start=$SECONDS
summary=()
step() { # step TITLE CMD...: one step with a header and its time in the summary
  local title=$1 start=$SECONDS; shift
  printf '\n==> %s\n' "$title" >&2
  "$@"
  summary+=("$(printf '%6ds  %s' $((SECONDS - start)) "$title")")
}
finish() {
  local rc=$?
  if [ -n "${others_pid:-}" ] && kill -0 "$others_pid" 2>/dev/null; then # stopped early
    pkill -TERM -P "$others_pid" 2>/dev/null || true
    kill "$others_pid" 2>/dev/null || true
  fi
  if [ ${#summary[@]} -gt 0 ]; then
    printf '\n==> make test: steps and their wall times\n' >&2
    printf '%s\n' "${summary[@]}" >&2
    printf '%6ds  total (%s)\n' $((SECONDS - run_start)) "$([ $rc = 0 ] && echo passed || echo "FAILED, exit $rc")" >&2
  fi
}
trap finish EXIT

main_version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)

other_pythons() {
  local python version found=0
  for python in $(hack/find-python.sh --all); do
    version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    [ "$version" = "$main_version" ] && continue
    found=1
    hack/venv.sh "$python" ".venv-$version"
    echo "unit tests and mypy on Python $version" >&2
    ".venv-$version/bin/pytest" tests/unit -q -p no:cacheprovider
    ".venv-$version/bin/mypy" --python-version "$version" --cache-dir ".mypy_cache-$version"
  done
  [ $found = 1 ] || echo "no other supported Python (3.11-3.13) found: only $main_version is tested" >&2
}

# Two pytest workers (one test file at a time each: files do not share CRDs or namespaces).
# Most integration tests wait on the API server, a Lease or a role, so two overlap well even
# on 2 CPUs. PYTEST_WORKERS=0 runs them in one process.
PYTEST_WORKERS=${PYTEST_WORKERS:-2}

on_cluster() {
  local parallel=()
  [ "$PYTEST_WORKERS" -gt 0 ] && parallel=(-n "$PYTEST_WORKERS" --dist loadfile)
  if [ "$PYTEST_WORKERS" -gt 0 ]; then
    "$BIN/pytest" tests -q -ra --durations=15 "${parallel[@]}" -m "not serial" "$@"
    local rc=0
    "$BIN/pytest" tests -q -ra -m serial "$@" || rc=$?
    [ $rc = 0 ] || [ $rc = 5 ] || return $rc # 5: no serial test selected
  else
    "$BIN/pytest" tests -q -ra --durations=15 "$@"
  fi
  "$MAKE" --no-print-directory molecule-syntax
  env PATH="$repo/$BIN:$PATH" "$BIN/molecule" test -s default
}

if [ "${1:-}" = "--on-cluster" ]; then # step 5, inside hack/with-cluster.sh
  shift
  on_cluster "$@"
  exit
fi

step "venv (Python ${main_version:-?}: $PYTHON)" hack/venv.sh "$PYTHON" .venv
step "lint (ruff, mypy)" "$MAKE" --no-print-directory lint
# The other Pythons' checks run beside the next steps (mostly pip and waiting for the cluster's
# tests): their output goes to a log, shown when they are done.
others_log=.venv-others.log
printf '\n==> unit tests and mypy on the other supported Pythons: started beside the next steps (log: %s)\n' "$others_log" >&2
( start=$SECONDS; other_pythons; echo "other Pythons: done in $((SECONDS - start)) s" ) >"$others_log" 2>&1 &
others_pid=$!
others_done() {
  local rc=0
  wait "$others_pid" || rc=$?
  grep -E '^(venv: .* ready|unit tests and mypy on|Success:|[0-9]+ passed|no other supported|other Pythons: done)' "$others_log" >&2 || true
  if [ $rc != 0 ]; then
    tail -n 40 "$others_log" >&2
    echo "the other Pythons' checks failed (exit $rc); whole log: $others_log" >&2
    return $rc
  fi
  local took; took=$(sed -n 's/^other Pythons: done in \([0-9]*\) s$/\1/p' "$others_log")
  summary+=("$(printf '%6ss  %s' "${took:-?}" "unit tests and mypy on the other supported Pythons (beside the steps above)")")
}
step "the local control plane's binaries" hack/build-binaries.sh
if [ "$(id -u)" = 0 ]; then
  step "the images: base, seeds', tests/integration/sdk-operator's (buildah, debootstrap)" \
    "$BIN/python" -m tests.integration.kit.images
else
  echo "not root: the images are not built; tests/integration/test_image.py is skipped" >&2
fi
# Where the machine can host a real node (root, usable cgroups, ...), the real-node tests run and
# must pass: their packages, kubelet/kube-proxy and images are made here, before pytest.
why_not=$(mktemp)
if hack/real-node.sh check 2>"$why_not"; then
  step "the real node's packages, kubelet and kube-proxy, images" hack/real-node.sh prepare
  export OPERATOR_RUNNER_REQUIRE_REAL_NODE=1
else
  printf '\n==> the real node: skipped\n%s\ntests/integration/test_real_node.py is skipped.\n' \
    "$(cat "$why_not")" >&2
fi
rm -f "$why_not"
step "integration tests and molecule on one local cluster" hack/with-cluster.sh "$here/test.sh" --on-cluster "$@"
printf '\n==> unit tests and mypy on the other supported Pythons\n' >&2
others_done
