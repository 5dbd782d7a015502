#!/usr/bin/env python3
"""make lint: no Python module of runner/, bench/ or hack/ over MAX_LINES lines.

The house rule is modules of at most 400 lines, one responsibility each: a module that grows past
it holds two and is split by concern (a commit that moves the code, changing nothing else). The
Ansible modules and plugins of the bundled collection (runner/ansible/collections) are Ansible's
shape, one file each, and are not counted.

    hack/module_sizes.py [--max N] [--list]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("runner", "bench", "hack")
EXCLUDED = ("runner/ansible/collections",)
MAX_LINES = 400


def modules() -> list[Path]:
    found = []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            relative = path.relative_to(REPO).as_posix()
            if not any(relative.startswith(prefix + "/") for prefix in EXCLUDED):
                found.append(path)
    return found


def lines_of(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=MAX_LINES, help="lines allowed per module")
    parser.add_argument("--list", action="store_true", help="print every module's size")
    args = parser.parse_args(argv)
    sizes = sorted(((lines_of(p), p.relative_to(REPO)) for p in modules()), reverse=True)
    if args.list:
        for size, path in sizes:
            print(f"{size:6d} {path}")
    over = [(size, path) for size, path in sizes if size > args.max]
    for size, path in over:
        print(f"{path}: {size} lines, over {args.max}: split it by concern", file=sys.stderr)
    if over:
        return 1
    size, path = sizes[0]
    print(
        f"module sizes: {len(sizes)} modules, none over {args.max} lines (largest: {path}, {size})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
