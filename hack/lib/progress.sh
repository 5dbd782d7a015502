# shellcheck shell=bash
# Long steps that a new user can watch: sourced by the hack/ scripts.
#
#   with_progress PREFIX WHAT LOG CMD...
#     runs CMD with its output in LOG; while it runs, prints "PREFIX: WHAT: still running, 1m30s
#     so far (last: <the log's last line>)" on stderr every 30 s; returns CMD's exit status.
#     CMD may be a shell function; it runs with errexit off, as in an `if` condition.

elapsed() { local s=$1; printf '%dm%02ds' $((s / 60)) $((s % 60)); }

with_progress() {
  local prefix=$1 what=$2 log=$3 start=$SECONDS pid last i
  shift 3
  # errexit off as in an `if` condition, where the callers ran these steps before
  (set +e; "$@") >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for ((i = 0; i < 30; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 1
    done
    if kill -0 "$pid" 2>/dev/null; then
      last=$(tail -n 1 "$log" 2>/dev/null | cut -c1-80)
      echo "$prefix: $what: still running, $(elapsed $((SECONDS - start))) so far${last:+ (last: $last)}" >&2
    fi
  done
  wait "$pid"
}
