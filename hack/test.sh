#!/usr/bin/env bash
# `make test`: everything CI runs, in steps that each say what they do and how long they took.
#
# Everything runs on one ansible-core line, $ANSIBLE_CORE (hack/lines.sh; default 2.18), in its
# virtualenv (.venv for the default line, .venv-ansible-<line> otherwise):
#
#   1. the line's virtualenv with $PYTHON (the newest Python the line runs on, or PYTHON=...)
#   2. lint: ruff, mypy
#   3. the line's other Pythons found (PATH, pyenv): their own virtualenv, unit tests and mypy,
#      in the background beside steps 4 and 5 (their log is shown at the end)
#   4. the local control plane's binaries (built once per machine, before any test starts); as
#      root, the images (hack/image.sh, cached by content hash): the base image, the seeds' image
#      and tests/integration/sdk-operator's, FROM it, that tests/integration/test_image.py runs
#      and test_real_node.py deploys; where the machine can host a real node, its packages,
#      kubelet/kube-proxy and images (tests/integration/test_real_node.py then must pass)
#   5. one throwaway local cluster for the rest of the run (or $OPERATOR_RUNNER_KUBECONFIG):
#      pytest (unit and integration tests), molecule syntax check, molecule scenario `default`
#   6. every other ansible-core line, in the background beside step 5 (log .venv-lines.log), one
#      after the other on one throwaway cluster of its own: its virtualenv on the newest Python
#      it runs on, the unit tests of what uses Ansible, and the integration tests marked `lines`
#      (what a line can change: conditions, extra vars, finalizers, dependents, k8s_status,
#      roles written for older lines; warm and plain executors) on the lines of LINES_FULL
#      (default: every line), tests/integration/test_line_compat.py alone on the others.
#      LINES="2.15 2.21" picks some lines; LINES=none, none.
#
# Arguments are passed to pytest (e.g. hack/test.sh -k reconcile).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
cd "$repo"
LINE=${ANSIBLE_CORE:-$(hack/lines.sh default)}
hack/lines.sh check "$LINE"
PYTHON=${PYTHON:-$(hack/lines.sh python "$LINE" || echo python3)}
MAKE=${MAKE:-make}
VENV=$(hack/lines.sh venv "$LINE")
BIN=$VENV/bin
export ANSIBLE_CORE=$LINE VENV

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
  local pid
  for pid in ${others_pid:-} ${lines_pid:-}; do
    if kill -0 "$pid" 2>/dev/null; then # stopped early
      pkill -TERM -P "$pid" 2>/dev/null || true
      kill "$pid" 2>/dev/null || true
    fi
  done
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
  # shellcheck disable=SC2046
  for python in $(hack/find-python.sh --all $(hack/lines.sh pythons "$LINE")); do
    version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    [ "$version" = "$main_version" ] && continue
    found=1
    hack/venv.sh "$python" "$VENV-$version" "$LINE"
    echo "unit tests and mypy on Python $version" >&2
    "$VENV-$version/bin/pytest" tests/unit -q -p no:cacheprovider
    "$VENV-$version/bin/mypy" --python-version "$version" --cache-dir ".mypy_cache-$version"
  done
  [ $found = 1 ] || echo "no other Python of ansible-core $LINE ($(hack/lines.sh pythons "$LINE")) found: only $main_version is tested" >&2
}

# The unit tests a line can change: those of modules that use Ansible or ansible-runner, or run
# ansible-playbook (the rest is pure logic, tested on the main line).
line_unit_tests() {
  grep -lE '^(from|import) (ansible|ansible_runner)|runner\.ansible|ansible-playbook|runner\.reconcile\.extravars' tests/unit/test_*.py
}

# Step 6, inside hack/with-cluster.sh: every other line, one after the other, on that cluster.
# The lines of LINES_FULL (default: every line) run every integration test marked `lines`; the
# others (LINES_FULL="2.15 2.21" narrows it) run tests/integration/test_line_compat.py alone.
other_lines() {
  local line python venv start took failed=()
  for line in $OTHER_LINES; do
    start=$SECONDS
    echo "ansible-core $line: its virtualenv, unit tests, integration tests marked lines" >&2
    if ! python=$(hack/lines.sh python "$line"); then
      failed+=("$line (no Python)"); continue
    fi
    venv=$(hack/lines.sh venv "$line")
    if ! hack/venv.sh "$python" "$venv" "$line"; then
      failed+=("$line (venv)"); continue
    fi
    local unit=0 integration=0 t0=$SECONDS t1 selected=(-m lines)
    # shellcheck disable=SC2046
    "$venv/bin/pytest" $(line_unit_tests) -q -p no:cacheprovider -n 2 || unit=$?
    t1=$SECONDS
    [[ " $LINES_FULL " == *" $line "* ]] || selected=(tests/integration/test_line_compat.py)
    # two workers, one test file at a time each (as the main suite): most of it waits
    "$venv/bin/pytest" tests/integration "${selected[@]}" -q -ra -p no:cacheprovider -n 2 \
      --dist loadfile || integration=$?
    took=$((SECONDS - start))
    if [ $unit = 0 ] && [ $integration = 0 ]; then
      echo "ansible-core $line: passed in $took s (unit $((t1 - t0)) s, integration $((SECONDS - t1)) s)" >&2
    else
      echo "ansible-core $line: FAILED after $took s (unit exit $unit, integration exit $integration)" >&2
      failed+=("$line")
    fi
  done
  [ ${#failed[@]} = 0 ] || { echo "lines that failed: ${failed[*]}" >&2; return 1; }
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
if [ "${1:-}" = "--other-lines" ]; then # step 6, inside hack/with-cluster.sh
  other_lines
  exit
fi
if [ "${LINES:-}" = none ]; then
  OTHER_LINES=
else
  OTHER_LINES=$(for l in ${LINES:-$(hack/lines.sh list)}; do hack/lines.sh check "$l"; [ "$l" = "$LINE" ] || echo "$l"; done | tr '\n' ' ')
fi
export OTHER_LINES
LINES_FULL=${LINES_FULL:-$(hack/lines.sh list | tr '\n' ' ')}
export LINES_FULL

step "venv (ansible-core $LINE, Python ${main_version:-?}: $PYTHON)" hack/venv.sh "$PYTHON" "$VENV" "$LINE"
step "lint (ruff, mypy)" "$MAKE" --no-print-directory lint
# The other Pythons' checks run beside the next steps (mostly pip and waiting for the cluster's
# tests): their output goes to a log, shown when they are done.
others_log=.venv-others.log
printf '\n==> unit tests and mypy on the line'"'"'s other Pythons: started beside the next steps (log: %s)\n' "$others_log" >&2
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
  summary+=("$(printf '%6ss  %s' "${took:-?}" "unit tests and mypy on the line's other Pythons (beside the steps above)")")
}
lines_log=.venv-lines.log
lines_done() {
  [ -n "${lines_pid:-}" ] || return 0
  local rc=0
  wait "$lines_pid" || rc=$?
  grep -E '^(ansible-core [0-9.]+: (passed|FAILED)|lines that failed|[0-9]+ (passed|failed)|venv: .* ready|other lines: done)' "$lines_log" >&2 || true
  if [ $rc != 0 ]; then
    tail -n 60 "$lines_log" >&2
    echo "the other ansible-core lines' tests failed (exit $rc); whole log: $lines_log" >&2
    return $rc
  fi
  local took; took=$(sed -n 's/^other lines: done in \([0-9]*\) s$/\1/p' "$lines_log")
  summary+=("$(printf '%6ss  %s' "${took:-?}" "the other ansible-core lines ($OTHER_LINES): venv, unit, integration -m lines (beside the steps above)")")
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
# The other lines run beside the main suite, on a throwaway cluster of their own (their tests
# install the same CRDs as the main suite's).
if [ -n "$OTHER_LINES" ]; then
  printf '\n==> the other ansible-core lines (%s): started beside the next step (log: %s)\n' "$OTHER_LINES" "$lines_log" >&2
  ( start=$SECONDS; env -u OPERATOR_RUNNER_KUBECONFIG hack/with-cluster.sh "$here/test.sh" --other-lines; echo "other lines: done in $((SECONDS - start)) s" ) >"$lines_log" 2>&1 &
  lines_pid=$!
fi
step "integration tests and molecule on one local cluster" hack/with-cluster.sh "$here/test.sh" --on-cluster "$@"
printf '\n==> unit tests and mypy on the line'"'"'s other Pythons\n' >&2
others_done
printf '\n==> the other ansible-core lines\n' >&2
lines_done
