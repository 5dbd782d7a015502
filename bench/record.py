"""A bench's result where the figures page reads it: bench/results/<name>.json.

Each bench that measures figures ends by writing one record: which bench, the command, when,
on what machine (CPUs, memory, kernel, Python, ansible-core, the commit), and its figures as
tables of plain values with notes. The latest run of a bench replaces its record;
`python -m bench.figures` renders docs/figures.md from every record, and `make lint` checks
that the page is what the records give. A bench's full output (per-CR latencies, logs) stays
where its own --out/--json puts it.

BENCH_RECORD=0 in the environment writes no record (bench.lines sets it for the breakdowns it
runs, one per line and executor: its own record holds them all).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .harness import BENCH, REPO

RESULTS = BENCH / "results"
SCHEMA = 1
Value = str | int | float | None
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_KEYS = ("schema", "name", "bench", "title", "command", "date", "machine", "tables", "notes")


@dataclass(frozen=True)
class Table:
    """One table of a record: a title (may be empty), the column names, rows of plain values."""

    title: str
    columns: list[str]
    rows: list[list[Value]] = field(default_factory=list)


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _cpu_model() -> str | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return None


def _memory_gib() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """The machine and the code a bench ran on, as the record keeps them."""
    core = _version("ansible-core")
    return {
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": _cpu_model(),
        "memory_gib": _memory_gib(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "ansible_core": core,
        "line": ".".join(core.split(".")[:2]) if core else None,
        "commit": _git("rev-parse", "--short=12", "HEAD") or None,
        # the code measured: runner/ and bench/, the records themselves left out
        "uncommitted": len(
            _git("status", "--porcelain", "--", "runner", "bench", ":!bench/results").splitlines()
        ),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def command_line(argv: Sequence[str] | None = None) -> str:
    """How this bench was started: `python -m bench.<module> ARGS` (the interpreter left out,
    a --kubeconfig's file as K: a throwaway cluster's path says nothing)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    program = f"python -m {spec.name}" if spec is not None else Path(sys.argv[0]).name
    args = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(args):
        if arg.startswith("--kubeconfig="):
            args[i] = "--kubeconfig=K"
        elif arg == "--kubeconfig" and i + 1 < len(args):
            args[i + 1] = "K"
    return " ".join([program, *(shlex.quote(arg) for arg in args)])


def write(
    name: str,
    bench: str,
    title: str,
    tables: Sequence[Table],
    notes: Sequence[str] = (),
    *,
    results: Path = RESULTS,
) -> Path | None:
    """Write the record `name` (bench/results/<name>.json) and return its path; None when
    BENCH_RECORD=0."""
    if os.environ.get("BENCH_RECORD", "1") == "0":
        return None
    if not _NAME.match(name):
        raise ValueError(f"record name {name!r}: lower case letters, digits, '.', '_', '-'")
    record = {
        "schema": SCHEMA,
        "name": name,
        "bench": bench,
        "title": title,
        "command": command_line(),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "tables": [{"title": t.title, "columns": t.columns, "rows": t.rows} for t in tables],
        "notes": list(notes),
    }
    check(record, name)
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"record: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    return path


def check(record: object, where: str) -> dict[str, Any]:
    """The record, if it has the shape write() gives; ValueError naming `where` and what is
    wrong otherwise."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: not a JSON object")
    missing = [key for key in _KEYS if key not in record]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    if record["schema"] != SCHEMA:
        raise ValueError(f"{where}: schema {record['schema']!r}, this code reads {SCHEMA}")
    if not isinstance(record["machine"], dict):
        raise ValueError(f"{where}: machine is not an object")
    for i, table in enumerate(record["tables"]):
        columns = table.get("columns") if isinstance(table, dict) else None
        if not isinstance(columns, list) or not isinstance(table.get("rows"), list):
            raise ValueError(f"{where}: table {i + 1} needs columns and rows")
        for j, row in enumerate(table["rows"]):
            if not isinstance(row, list) or len(row) != len(columns):
                size = len(row) if isinstance(row, list) else "no list of"
                raise ValueError(
                    f"{where}: table {i + 1}, row {j + 1}: {size} values for {len(columns)} columns"
                )
            if any(not isinstance(v, str | int | float | type(None)) for v in row):
                raise ValueError(f"{where}: table {i + 1}, row {j + 1}: plain values only")
    return record


def read(path: Path) -> dict[str, Any]:
    """A record file, checked; ValueError naming the file and what is wrong."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: {err}") from None
    return check(data, str(path))


def cell(value: Value) -> str:
    """A value as a table shows it: - for none, floats without trailing zeros."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def text(table: Table) -> str:
    """The table in fixed-width columns, for the terminal."""
    cells = [table.columns, *([cell(v) for v in row] for row in table.rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(table.columns))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(([table.title] if table.title else []) + [line.rstrip() for line in lines])
