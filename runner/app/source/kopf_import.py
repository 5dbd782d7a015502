"""kopf, imported without the `kubernetes` package (~60 MB of generated models).

kopf's `_cogs/helpers/thirdparty.py` imports `kubernetes.client` at import time when the package
is installed, only to recognise its model objects, which the runner never hands to kopf. The
package must stay installed (Ansible's kubernetes.core modules need it), so kopf is imported here
while a finder refuses `kubernetes`: kopf takes its documented "library not installed" path.
Every runner module gets kopf from here (`from .kopf_import import kopf`); a unit test checks it.
Only that import is affected: the finder is removed afterwards, and a later `import kubernetes`
(exec plugins, runner/kube/clientconfig.py) works as usual.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

__all__ = ["kopf", "kopf_observation"]


class _RefuseKubernetes(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "kubernetes" or fullname.startswith("kubernetes."):
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (refused while importing kopf)", name=fullname
            )
        return None


_finder = _RefuseKubernetes()
sys.meta_path.insert(0, _finder)
try:
    import kopf
    from kopf._core.reactor import observation as kopf_observation  # namespaces.py patches it
finally:
    sys.meta_path.remove(_finder)
