#!/usr/bin/env bash
# `make test`: everything CI runs, in steps that each say what they do and how long they took.
#
# Everything runs on one ansible-core line, $ANSIBLE_CORE (hack/lines.sh; default 2.18), in its
# virtualenv (.venv for the default line, .venv-ansible-<line> otherwise):
#
#   1. the line's virtualenv with $PYTHON (the newest Python the line runs on, or PYTHON=...)
#   2. lint: ruff, mypy, the import contract, module sizes, shellcheck, the docs (make lint)
#   3. the line's other Pythons found (PATH, pyenv): their own virtualenv, unit tests and mypy,
#      in the background beside steps 4 and 5 (their log is shown at the end)
#   4. the local control plane's binaries, built once per machine, before any test starts, and
#      beside them (logs .make-test-*.log), with SDK_CLI=1, operator-sdk's CLI with kustomize
#      (hack/sdk-cli.sh or `make sdk-cli`, for tests/integration/test_sdk_cli.py: 7 min of CPU
#      cold, which a fresh clone's 45 minutes cannot spare, so it is left out by default and the
#      test runs when the CLI is in the cache, skipped with how to build it otherwise); as root,
#      also beside them, the images (hack/image.sh, cached by content hash): the base image, the seeds' image
#      and tests/integration/sdk-operator's and ubi-operator's (Dockerfiles written for
#      operator-sdk's UBI image), FROM it, that tests/integration/test_image.py runs and
#      test_real_node.py deploys; then, where the machine can host a real node, its packages,
#      kubelet/kube-proxy and images (tests/integration/test_real_node.py then must pass)
#   5. one throwaway local cluster for the rest of the run (or $OPERATOR_RUNNER_KUBECONFIG):
#      pytest (unit and integration tests), molecule syntax check, molecule scenario `default`;
#      test_real_node.py brings up its own cluster with the real node and runs there the seeds
#      deployed with `make deploy NODE=real`, the sdk-operator, the ubi-operator and
#      molecule's scenario `kind`
#   6. every other ansible-core line, in the background beside step 5 (log .venv-lines.log), one
#      after the other on one throwaway cluster of its own: its virtualenv on the newest Python
#      it runs on, the unit tests of what uses Ansible, and the integration tests marked `lines`
#      (what a line can change: conditions, extra vars, finalizers, dependents, k8s_status,
#      roles written for older lines; warm and plain executors) on the lines of LINES_FULL
#      (default 2.15 2.21: the oldest and the newest, one of each set of warm patches beside the
#      default line), tests/integration/test_line_compat.py and test_preview_lines.py (a preview
#      of the jump from the default line to that one) alone on the others.
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
# Two pytest workers (one test file at a time each: files do not share CRDs or namespaces).
# Most integration tests wait on the API server, a Lease or a role, so two overlap well even
# on 2 CPUs. PYTEST_WORKERS=0 runs them in one process.
PYTEST_WORKERS=${PYTEST_WORKERS:-2}
LINES_FULL=${LINES_FULL:-$(hack/lines.sh ends)}
export LINES_FULL
OTHERS_LOG=.venv-others.log
LINES_LOG=.venv-lines.log

# --- steps and their times ------------------------------------------------------------------

summary=()
failures=() # what failed in the background logs, for the table's end (CI shows the output's tail)
step() { # step TITLE CMD...: one step with a header and its time in the summary
  local title=$1 start=$SECONDS; shift
  printf '\n==> %s\n' "$title" >&2
  "$@"
  summary+=("$(printf '%6ds  %s' $((SECONDS - start)) "$title")")
}

finish() { # at exit: background checks stopped early, then the table of the steps' times
  local rc=$? pid
  for pid in ${others_pid:-} ${lines_pid:-} "${beside_pids[@]}"; do
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
  if [ ${#failures[@]} -gt 0 ]; then
    printf 'what failed beside the main suite:\n' >&2
    printf '  %s\n' "${failures[@]}" >&2
  fi
}

note_failures() { # note_failures LOG: its failed lines and tests (pytest's FAILED/ERROR lines,
  # each with the ansible-core line it ran on), at most 20, for the table's end
  local found
  while IFS= read -r found; do failures+=("$found"); done < <(
    awk '/^ansible-core [0-9.]+: its virtualenv/ { on = "ansible-core " $2 " " }
         /^ansible-core [0-9.]+: FAILED/ { print; next }
         /^(FAILED|ERROR) / { print on substr($0, 1, 300) }' "$1" | head -n 20)
}

python_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }

# --- step 3: the line's other Pythons -------------------------------------------------------

other_pythons() {
  local python version found=0 pythons
  read -r -a pythons <<<"$(hack/lines.sh pythons "$LINE")"
  while read -r python; do
    version=$(python_version "$python")
    [ "$version" = "$main_version" ] && continue
    found=1
    hack/venv.sh "$python" "$VENV-$version" "$LINE"
    echo "unit tests and mypy on Python $version" >&2
    "$VENV-$version/bin/pytest" tests/unit -q -p no:cacheprovider
    "$VENV-$version/bin/mypy" --python-version "$version" --cache-dir ".mypy_cache-$version"
  done < <(hack/find-python.sh --all "${pythons[@]}")
  [ $found = 1 ] || echo "no other Python of ansible-core $LINE (${pythons[*]}) found: only $main_version is tested" >&2
}

start_other_pythons() { # beside the next steps (mostly pip and waiting for the cluster's tests)
  printf '\n==> unit tests and mypy on the line'"'"'s other Pythons: started beside the next steps (log: %s)\n' "$OTHERS_LOG" >&2
  ( start=$SECONDS; other_pythons; echo "other Pythons: done in $((SECONDS - start)) s" ) >"$OTHERS_LOG" 2>&1 &
  others_pid=$!
}

others_done() {
  local rc=0 took
  wait "$others_pid" || rc=$?
  grep -E '^(venv: .* ready|unit tests and mypy on|Success:|[0-9]+ passed|no other supported|other Pythons: done)' "$OTHERS_LOG" >&2 || true
  if [ $rc != 0 ]; then
    tail -n 40 "$OTHERS_LOG" >&2
    note_failures "$OTHERS_LOG"
    echo "the other Pythons' checks failed (exit $rc); whole log: $OTHERS_LOG" >&2
    return $rc
  fi
  took=$(sed -n 's/^other Pythons: done in \([0-9]*\) s$/\1/p' "$OTHERS_LOG")
  summary+=("$(printf '%6ss  %s' "${took:-?}" "unit tests and mypy on the line's other Pythons (beside the steps above)")")
}

# --- step 6: the other ansible-core lines ---------------------------------------------------

# The unit tests a line can change: those of modules that use Ansible or ansible-runner, or run
# ansible-playbook (the rest is pure logic, tested on the main line).
line_unit_tests() {
  grep -lE '^(from|import) (ansible|ansible_runner)|runner\.ansible|ansible-playbook|runner\.reconcile\.extravars' tests/unit/test_*.py
}

# one_line LINE: its virtualenv, unit tests, and integration tests: every one marked `lines` on
# the lines of LINES_FULL (default 2.15 2.21; LINES_FULL="$(hack/lines.sh list)" for every one),
# tests/integration/test_line_compat.py and test_preview_lines.py on the others. Fails with what
# failed in $line_failure.
one_line() {
  local line=$1 python venv start=$SECONDS unit=0 integration=0 t0 t1 tests
  local selected=(tests/integration) rc
  python=$(hack/lines.sh python "$line") || { line_failure="$line (no Python)"; return 1; }
  venv=$(hack/lines.sh venv "$line")
  hack/venv.sh "$python" "$venv" "$line" || { line_failure="$line (venv)"; return 1; }
  mapfile -t tests < <(line_unit_tests)
  t0=$SECONDS
  "$venv/bin/pytest" "${tests[@]}" -q -p no:cacheprovider -n 2 || unit=$?
  t1=$SECONDS
  [[ " $LINES_FULL " == *" $line "* ]] ||
    selected=(tests/integration/test_line_compat.py tests/integration/test_preview_lines.py)
  # two workers, one test file at a time each (as the main suite): most of it waits; then the
  # serial ones alone (test_warm_stop.py loads the CPUs itself)
  "$venv/bin/pytest" "${selected[@]}" -q -ra -p no:cacheprovider -n 2 \
    --dist loadfile -m "lines and not serial" || integration=$?
  "$venv/bin/pytest" "${selected[@]}" -q -ra -p no:cacheprovider -m "lines and serial" || {
    rc=$?; [ $rc = 5 ] || integration=$rc; }
  if [ $unit = 0 ] && [ $integration = 0 ]; then
    echo "ansible-core $line: passed in $((SECONDS - start)) s (unit $((t1 - t0)) s, integration $((SECONDS - t1)) s)" >&2
    return 0
  fi
  echo "ansible-core $line: FAILED after $((SECONDS - start)) s (unit exit $unit, integration exit $integration)" >&2
  line_failure=$line
  return 1
}

# Step 6, inside hack/with-cluster.sh: every other line, one after the other, on that cluster.
other_lines() {
  local line failed=() line_failure
  for line in $OTHER_LINES; do
    echo "ansible-core $line: its virtualenv, unit tests, integration tests marked lines" >&2
    one_line "$line" || failed+=("$line_failure")
  done
  [ ${#failed[@]} = 0 ] || { echo "lines that failed: ${failed[*]}" >&2; return 1; }
}

other_lines_of() { # other_lines_of LINES: those of LINES (default: every line) but $LINE
  local l
  [ "${1:-}" != none ] || return 0
  for l in ${1:-$(hack/lines.sh list)}; do
    hack/lines.sh check "$l" || return 1
    [ "$l" = "$LINE" ] || printf '%s ' "$l"
  done
}

start_other_lines() { # beside the main suite, on a throwaway cluster of their own (their tests
  # install the same CRDs as the main suite's)
  [ -n "$OTHER_LINES" ] || return 0
  printf '\n==> the other ansible-core lines (%s): started beside the next step (log: %s)\n' "$OTHER_LINES" "$LINES_LOG" >&2
  ( start=$SECONDS; env -u OPERATOR_RUNNER_KUBECONFIG hack/with-cluster.sh "$here/test.sh" --other-lines; echo "other lines: done in $((SECONDS - start)) s" ) >"$LINES_LOG" 2>&1 &
  lines_pid=$!
}

lines_done() {
  [ -n "${lines_pid:-}" ] || return 0
  local rc=0 took
  wait "$lines_pid" || rc=$?
  grep -E '^(ansible-core [0-9.]+: (passed|FAILED)|lines that failed|[0-9]+ (passed|failed)|venv: .* ready|other lines: done)' "$LINES_LOG" >&2 || true
  if [ $rc != 0 ]; then
    tail -n 60 "$LINES_LOG" >&2
    note_failures "$LINES_LOG"
    echo "the other ansible-core lines' tests failed (exit $rc); whole log: $LINES_LOG" >&2
    return $rc
  fi
  took=$(sed -n 's/^other lines: done in \([0-9]*\) s$/\1/p' "$LINES_LOG")
  summary+=("$(printf '%6ss  %s' "${took:-?}" "the other ansible-core lines ($OTHER_LINES): venv, unit, integration -m lines (beside the steps above)")")
}

# --- steps 4 and 5 --------------------------------------------------------------------------

# Steps that need neither the binaries nor each other (the images, operator-sdk's CLI) run
# beside the binaries' build, whose first minutes are mostly module downloads: a cold run gains
# their time. The real node's step comes after them all (it and the images may both apt-get).
beside_pids=()
beside_logs=()
beside_titles=()
beside() { # beside TITLE LOG CMD...: CMD in the background, its output in LOG
  local title=$1 log=$2; shift 2
  printf '
==> %s: started beside the next step (log: %s)
' "$title" "$log" >&2
  ( start=$SECONDS; "$@"; echo "beside: done in $((SECONDS - start)) s" ) >"$log" 2>&1 &
  beside_pids+=("$!")
  beside_logs+=("$log")
  beside_titles+=("$title")
}

beside_done() { # wait for every `beside` step; the first that failed shows its log's tail
  local i rc first_rc=0 took
  for i in "${!beside_pids[@]}"; do
    rc=0
    wait "${beside_pids[$i]}" || rc=$?
    if [ $rc != 0 ]; then
      printf '
==> %s: FAILED (exit %s); the end of %s:\n' "${beside_titles[$i]}" "$rc" "${beside_logs[$i]}" >&2
      tail -n 40 "${beside_logs[$i]}" >&2
      [ "$first_rc" != 0 ] || first_rc=$rc
      continue
    fi
    took=$(sed -n 's/^beside: done in \([0-9]*\) s$/\1/p' "${beside_logs[$i]}")
    summary+=("$(printf '%6ss  %s' "${took:-?}" "${beside_titles[$i]} (beside the binaries)")")
  done
  beside_pids=()
  return "$first_rc"
}

images() { # as root: the images that test_image.py runs and test_real_node.py deploys
  if [ "$(id -u)" != 0 ]; then
    echo "not root: the images are not built; tests/integration/test_image.py is skipped" >&2
    return 0
  fi
  beside "the images: base, seeds', tests/integration/sdk-operator's and ubi-operator's (buildah, debootstrap)" \
    .make-test-images.log "$BIN/python" -m tests.integration.kit.images
}

real_node() { # where the machine can host a real node (root, usable cgroups, ...), the real-node
  # tests run and must pass: their packages, kubelet/kube-proxy and images are made here
  local why_not
  why_not=$(mktemp)
  if hack/real-node.sh check 2>"$why_not"; then
    step "the real node's packages, kubelet and kube-proxy, images" hack/real-node.sh prepare
    export OPERATOR_RUNNER_REQUIRE_REAL_NODE=1
  else
    printf '\n==> the real node: skipped\n%s\ntests/integration/test_real_node.py is skipped.\n' \
      "$(cat "$why_not")" >&2
  fi
  rm -f "$why_not"
}

# Step 5, inside hack/with-cluster.sh: pytest, then molecule.
on_cluster() {
  local rc=0
  if [ "$PYTEST_WORKERS" -gt 0 ]; then
    "$BIN/pytest" tests -q -ra --durations=15 -n "$PYTEST_WORKERS" --dist loadfile -m "not serial" "$@"
    "$BIN/pytest" tests -q -ra -m serial "$@" || rc=$?
    [ $rc = 0 ] || [ $rc = 5 ] || return $rc # 5: no serial test selected
  else
    "$BIN/pytest" tests -q -ra --durations=15 "$@"
  fi
  "$MAKE" --no-print-directory molecule-syntax
  env PATH="$repo/$BIN:$PATH" "$BIN/molecule" test -s default
}

main() {
  run_start=$SECONDS
  trap finish EXIT
  trap 'exit 143' TERM # stopped: the table says FAILED, not passed
  main_version=$(python_version "$PYTHON" 2>/dev/null || true)
  OTHER_LINES=$(other_lines_of "${LINES:-}")
  export OTHER_LINES
  step "venv (ansible-core $LINE, Python ${main_version:-?}: $PYTHON)" hack/venv.sh "$PYTHON" "$VENV" "$LINE"
  step "lint (ruff, mypy, the import contract, module sizes, shellcheck, docs)" "$MAKE" --no-print-directory lint
  start_other_pythons
  images
  if [ "${SDK_CLI:-0}" != 0 ]; then
    beside "operator-sdk's CLI and kustomize (hack/sdk-cli.sh)" .make-test-sdk-cli.log hack/sdk-cli.sh
  fi
  step "the local control plane's binaries" hack/build-binaries.sh
  beside_done
  real_node
  start_other_lines
  step "integration tests and molecule on one local cluster" hack/with-cluster.sh "$here/test.sh" --on-cluster "$@"
  printf '\n==> unit tests and mypy on the line'"'"'s other Pythons\n' >&2
  others_done
  printf '\n==> the other ansible-core lines\n' >&2
  lines_done
}

case "${1:-}" in
  --on-cluster) shift; on_cluster "$@" ;; # step 5, inside hack/with-cluster.sh
  --other-lines) other_lines ;;           # step 6, inside hack/with-cluster.sh
  *) main "$@" ;;
esac
