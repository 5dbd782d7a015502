"""Where runs leave their files: operator-sdk's layout, bounded in count, removed with the CR.

Every CR gets operator-sdk's runner folder, `<root>/<group>/<version>/<kind>/<namespace>/<name>/`
(empty parts left out, as Go's filepath.Join does: the core group, a cluster-scoped CR's
namespace), mode 0700 (it holds the CR's spec). ansible-runner writes one folder per run into its
`artifacts/`, and `artifacts/latest` points at the last one, so the last run's output is where
operator-sdk's docs say: `.../artifacts/latest/stdout`.

The root is operator-sdk's, `/tmp/ansible-operator/runner`, for the one operator that holds its
lock (`.lock` in it, an flock held as long as the process lives); a second operator on the same
host (tests, `make run` beside a `reconcile`) gets a root of its own instead,
`$TMPDIR/operator-runner/<hash of the watches file's path>`, and says so, so two operators never
sweep each other's folders.

Unlike operator-sdk (whose folders are never removed, filling disks and inodes), at most
`maxRunnerArtifacts` runs are kept per CR (the annotation's `"0"` keeps all, as there) besides
the first failed run of a CR that fails since (`artifacts/first-failed`, operator-sdk#3931: the
run that shows what changed; `latest` is the last failed one), kept until a later run succeeds;
the folder goes when the CR goes, and `sweep` removes folders of CRs that disappeared while the
operator was down. retention.py caps the runs of all CRs together.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runner.kube.resources import ObjectRef

log = logging.getLogger("runner.artifacts")

#: operator-sdk's runner folder root (internal/ansible/runner/runner.go).
SDK_ROOT = Path("/tmp/ansible-operator/runner")
LATEST = "latest"
FAILED = "first-failed"  # where the CR started failing, kept until a run succeeds (sdk#3931)
_held: list[int] = []  # the lock of the shared root, held until the process ends


def claim(root: Path) -> bool:
    """Take `root` for this process (an flock on `root/.lock`); False when another live process
    has it, or it cannot be made ours (another user's folder)."""
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held.append(fd)
    return True


def private_root(watches_file: Path, tmp: str | None = None) -> Path:
    """`$TMPDIR/operator-runner/<hash of the watches file's absolute path>`."""
    digest = hashlib.sha256(str(watches_file.absolute()).encode()).hexdigest()[:12]
    return Path(tmp or tempfile.gettempdir()) / "operator-runner" / digest


def default_artifacts_dir(
    watches_file: Path, tmp: str | None = None, shared: Path = SDK_ROOT
) -> Path:
    """operator-sdk's root when this process gets it, else one of its own (see the module)."""
    if claim(shared):
        return shared
    own = private_root(watches_file, tmp)
    log.info("artifacts: %s is in use by another operator on this host; using %s", shared, own)
    return own


def _parts(*parts: str) -> list[str]:
    return [p.replace("/", "_") for p in parts if p]


def run_events(private: Path, ident: str) -> list[dict[str, Any]]:
    """The job events ansible-runner wrote for the run `ident` of a CR's folder, in order."""
    events = []
    for path in (private / "artifacts" / ident / "job_events").glob("*.json"):
        try:
            event = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(event, dict):
            events.append(event)
    events.sort(key=lambda event: int(event.get("counter") or 0))
    return events


def latest_stdout(private: Path) -> Path:
    return private / "artifacts" / LATEST / "stdout"


class Artifacts:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(root, 0o700)

    def kind_dir(self, group: str, version: str, kind: str) -> Path:
        return self.root.joinpath(*_parts(group, version, kind))

    def _cr_dir(self, ref: ObjectRef) -> Path:
        r = ref.resource
        return self.kind_dir(r.group, r.version, r.kind).joinpath(
            *_parts(ref.namespace or "", ref.name)
        )

    def private_dir(self, ref: ObjectRef) -> Path:
        path = self._cr_dir(ref)
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path

    def remove(self, ref: ObjectRef) -> None:
        shutil.rmtree(self._cr_dir(ref), ignore_errors=True)

    def sweep(
        self,
        group: str,
        version: str,
        kind: str,
        alive: Iterable[ObjectRef],
        namespaced: bool | None = True,
    ) -> int:
        """Remove the folders of CRs of `kind` that are not `alive` (deleted while the operator
        was down, say); return how many. `namespaced` None: the scope is not known (no CR of
        the kind was seen), so everything under the kind goes."""
        base = self.kind_dir(group, version, kind)
        if not base.is_dir():
            return 0
        keep = {self._cr_dir(r) for r in alive}
        if namespaced:
            folders = [c for n in base.iterdir() if n.is_dir() for c in n.iterdir()]
        else:
            folders = list(base.iterdir())
        removed = 0
        for folder in folders:
            if folder not in keep and folder.is_dir():
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
        return removed


def _point(runs: Path, name: str, ident: str) -> None:
    """`runs/name` -> `ident`, replaced at once (relative: the folder may be moved or mounted)."""
    link = runs / f".{name}.{ident}"
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    os.symlink(ident, link)
    os.replace(link, runs / name)


def finish_run(private: Path, ident: str, keep: int, failed: bool | None = None) -> None:
    """After a run: its folder's mtime is its finish time, `artifacts/latest` points at it,
    `artifacts/first-failed` at it when it `failed` after a success (or as the CR's first run;
    the link goes when a run succeeds: `failed` False; None, a cancelled run, changes
    nothing), and only the `keep` newest runs stay besides the first failed one (`keep` < 1:
    all, as ansible-runner's --rotate-artifacts 0)."""
    runs = private / "artifacts"
    if not (runs / ident).is_dir():
        return
    os.utime(runs / ident)
    _point(runs, LATEST, ident)
    if failed and not (runs / FAILED).exists():  # not failing yet (or its run is gone)
        _point(runs, FAILED, ident)
    elif failed is False:
        (runs / FAILED).unlink(missing_ok=True)
    if keep < 1:
        return
    try:
        kept = runs / os.readlink(runs / FAILED)
    except OSError:
        kept = None
    folders = [
        p
        for p in runs.iterdir()
        if not p.name.startswith(".") and not p.is_symlink() and p.is_dir() and p != kept
    ]
    folders.sort(key=lambda p: (p.stat().st_mtime, p.name))
    for old in folders[: max(0, len(folders) - keep)]:
        if old.name != ident:
            shutil.rmtree(old, ignore_errors=True)
