#!/usr/bin/env bash
# `make lock ANSIBLE_CORE=2.x`: re-resolve constraints/ansible-core-2.x.txt, the exact versions
# of every Python dependency (direct and transitive) of operator-runner and its dev tools on
# that ansible-core line: the newest versions inside pyproject.toml's ranges that install with
# ansible-core ~=2.x.0, on each Python the line supports (hack/lines.sh) that is found here.
# A package whose version differs between those Pythons gets one pin per Python, with an
# environment marker.
#
#   hack/lock.sh LINE
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")

# resolve VERSION: pip's freeze of operator-runner[dev] with ansible-core ~=LINE on Python VERSION,
# in $work/freeze-VERSION (nothing when no such Python is found)
resolve() {
  local version=$1 python
  python=$("$here/find-python.sh" "$version") || { echo "lock: no Python $version found; its pins are left out" >&2; return 0; }
  echo "lock: resolving for ansible-core $line on Python $version ($python) ..." >&2
  "$python" -m venv "$work/$version"
  "$work/$version/bin/pip" install --quiet --disable-pip-version-check "$work/src[dev]" "ansible-core~=$line.0"
  "$work/$version/bin/pip" freeze --exclude operator-runner >"$work/freeze-$version"
  freezes+=("$version=$work/freeze-$version")
}

# write_constraints OUT VERSION=FREEZE...: one pin per package, or one per Python (with an
# environment marker) where the Pythons' versions differ
write_constraints() {
  python3 - "$line" "$@" <<'PY'
import sys
line, out, *freezes = sys.argv[1:]
pins: dict[str, dict[str, str]] = {}  # package -> python version -> pin
names: dict[str, str] = {}
versions = []
for item in freezes:
    version, path = item.split("=", 1)
    versions.append(version)
    for raw in open(path, encoding="utf-8"):
        raw = raw.strip()
        if not raw or raw.startswith("#") or "==" not in raw:
            continue
        name = raw.split("==", 1)[0]
        key = name.lower().replace("_", "-")
        names.setdefault(key, name)
        pins.setdefault(key, {})[version] = raw
lines = [
    f"# Exact versions of every Python dependency (direct and transitive) on ansible-core {line},",
    f"# resolved on Python {', '.join(sorted(versions))}. Regenerate with `make lock ANSIBLE_CORE={line}`.",
]
for key in sorted(pins, key=lambda k: names[k].lower()):
    by_python = pins[key]
    if len(set(by_python.values())) == 1 and len(by_python) == len(versions):
        lines.append(next(iter(by_python.values())))
    else:
        for version in sorted(by_python):
            lines.append(f'{by_python[version]} ; python_version == "{version}"')
open(out, "w", encoding="utf-8").write("\n".join(lines) + "\n")
PY
}

main() {
  local out version
  line=${1:?usage: hack/lock.sh LINE}
  "$here/lines.sh" check "$line"
  out=$repo/$("$here/lines.sh" constraints "$line")
  work=$(mktemp -d /tmp/operator-runner-lock.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  # operator-runner from a copy of its sources: pip builds a local project in place (build/), and
  # two locks at once would trip over each other there.
  mkdir "$work/src"
  cp -r "$repo/pyproject.toml" "$repo/README.md" "$repo/runner" "$work/src/"
  freezes=()
  for version in $("$here/lines.sh" pythons "$line"); do resolve "$version"; done
  [ ${#freezes[@]} -gt 0 ] || { echo "lock: no Python for ansible-core $line found" >&2; exit 1; }
  mkdir -p "$(dirname "$out")"
  write_constraints "$out" "${freezes[@]}"
  echo "lock: wrote ${out#"$repo"/}" >&2
}

main "$@"
