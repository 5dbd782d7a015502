"""Where runs leave their files: one private folder per CR, bounded in count, removed with the CR.

operator-sdk never removes runner artifact folders, so disk and inodes fill on busy clusters.
Here every CR gets `<root>/<group>/<kind>/<namespace>/<name>/` (mode 0700: it holds the CR's
spec), ansible-runner keeps at most `maxRunnerArtifacts` runs in it, the folder goes when the CR
goes, and `sweep` removes folders of CRs that disappeared while the operator was down.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from runner.kube.resources import ObjectRef


def default_artifacts_dir(watches_file: Path, tmp: str | None = None) -> Path:
    """`$TMPDIR/operator-runner/<hash of the watches file's absolute path>`: one root per
    operator, so two operators on one machine never sweep each other's folders."""
    digest = hashlib.sha256(str(watches_file.absolute()).encode()).hexdigest()[:12]
    return Path(tmp or tempfile.gettempdir()) / "operator-runner" / digest


def _safe(part: str) -> str:
    return part.replace("/", "_") or "_"


class Artifacts:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(root, 0o700)

    def kind_dir(self, ref: ObjectRef) -> Path:
        return self.root / _safe(ref.resource.group or "core") / _safe(ref.resource.kind)

    def private_dir(self, ref: ObjectRef) -> Path:
        path = self.kind_dir(ref) / _safe(ref.namespace or "_cluster") / _safe(ref.name)
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path

    def remove(self, ref: ObjectRef) -> None:
        path = self.kind_dir(ref) / _safe(ref.namespace or "_cluster") / _safe(ref.name)
        shutil.rmtree(path, ignore_errors=True)

    def sweep(self, group: str, kind: str, alive: Iterable[ObjectRef]) -> int:
        """Remove the folders of CRs of `kind` that are not `alive` (deleted while the operator
        was down, say); return how many."""
        keep = {(_safe(r.namespace or "_cluster"), _safe(r.name)) for r in alive}
        base = self.root / _safe(group or "core") / _safe(kind)
        removed = 0
        if not base.is_dir():
            return 0
        for ns_dir in base.iterdir():
            for cr_dir in ns_dir.iterdir() if ns_dir.is_dir() else ():
                if (ns_dir.name, cr_dir.name) not in keep:
                    shutil.rmtree(cr_dir, ignore_errors=True)
                    removed += 1
        return removed
