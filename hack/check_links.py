#!/usr/bin/env python3
"""make lint: the relative links of the Markdown files outside the docs site resolve.

The site (docs/, mkdocs --strict) checks its own links and anchors; README.md, CONTRIBUTING.md
and bench/README.md are read on their own, in a checkout or on a forge, so this checks theirs:
every relative link names a file or folder of the repository, and a link with #anchor names a
heading of that Markdown file (anchors as forges make them: lower case, punctuation dropped,
spaces to hyphens, -1, -2 ... for repeats). Links in code blocks and code spans are not links.
One line per broken link: FILE:LINE: TARGET: what is wrong.

    hack/check_links.py FILE.md...
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def prose_lines(text: str, blank_code: bool = True) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks, code spans blanked unless
    blank_code is false."""
    out, fence = [], ""
    for number, line in enumerate(text.splitlines(), 1):
        found = FENCE.match(line)
        if fence:
            if found and found.group(1) == fence:
                fence = ""
            continue
        if found:
            fence = found.group(1)
            continue
        if blank_code:
            line = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        out.append((number, line))
    return out


def slug(heading: str) -> str:
    """A heading's anchor as forges make it."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)  # emphasis marks, not snake_case
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(path.read_text(), blank_code=False):
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def targets(text: str) -> list[tuple[int, str]]:
    out = []
    for number, line in prose_lines(text):
        out += [(number, m.group(1)) for m in LINK.finditer(line)]
        reference = REFERENCE.match(line)
        if reference:
            out.append((number, reference.group(1)))
    return out


def problem(source: Path, target: str) -> str | None:
    """What is wrong with `target`, a link in `source`; None when it resolves."""
    if EXTERNAL.match(target):
        return None
    path_part, _, anchor = target.partition("#")
    if path_part.startswith("/"):
        return "an absolute path: write it relative to the file"
    path = (source.parent / path_part).resolve() if path_part else source
    if not path.is_relative_to(REPO):
        return "outside the repository"
    if not path.exists():
        return f"no such file or folder {path.relative_to(REPO)}"
    if anchor and path.suffix == ".md" and anchor not in anchors(path):
        return f"no heading with the anchor #{anchor} in {path.relative_to(REPO)}"
    return None


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    broken = checked = 0
    for name in argv:
        source = (Path.cwd() / name).resolve()
        for number, target in targets(source.read_text()):
            checked += 1
            what = problem(source, target)
            if what:
                broken += 1
                print(f"{name}:{number}: {target}: {what}", file=sys.stderr)
    if broken:
        return 1
    print(f"links: {checked} links of {len(argv)} files resolve ({', '.join(argv)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
