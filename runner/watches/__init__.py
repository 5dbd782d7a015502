"""Read ``watches.yaml``: which custom resources to watch and what Ansible content to run.

The file format is operator-sdk's (``internal/ansible/watches/watches.go`` in
operator-framework/ansible-operator-plugins, ansible-operator v1.42).  What operator-sdk
does, and what we reproduce:

* The whole file text goes through environment expansion first (Go ``os.Expand``):
  ``${NAME}`` and ``$NAME`` are replaced by the variable's value; references to unset
  variables are kept.
* The top level is a list of entries; a missing/empty file body means no watches.
* ``version`` and ``kind`` are required, ``group`` may be empty (core resources).
* Every key is matched case-insensitively (Go's encoding/json), so ``ManageStatus``
  works like ``manageStatus``; unknown keys are ignored.  We accept both too, with a
  warning.
* Scalars land in string fields as text (``version: 1`` is ``"1"``, a label value
  ``true`` is ``"true"``), booleans follow YAML 1.1 (``yes``, ``on``, ``y`` are true),
  and a key given twice in one mapping keeps its last value.
* Defaults: ``manageStatus`` true, ``watchDependentResources`` true,
  ``watchClusterScopedResources`` false, ``snakeCaseParameters`` true,
  ``watchAnnotationsChanges`` false, ``maxRunnerArtifacts`` 20 (0 also means 20),
  ``reconcilePeriod`` unset (operator-sdk then uses its ``--reconcile-period`` flag,
  default 10h), empty ``blacklist``, ``vars`` and ``selector``.
* ``reconcilePeriod`` is a Go duration string (``30s``, ``1m30s``, ``1.5h``, ``500ms``).
* A finalizer needs a ``name`` and a ``role``, a ``playbook`` or non-empty ``vars``
  (vars alone re-run the watch's own role/playbook with those vars on top).
* Two entries with the same group/version/kind are an error.

Ours in addition: ``validate`` and ``mutate`` (admission webhooks answered by a role or a
playbook, runner/watches/admission.py), ``convert`` (a role, a playbook or a map of renamed
fields that converts the kind's objects between the CRD's versions, served as its conversion
webhook, runner/watches/convert.py), and ``watchReads`` (a list of group/version/kind, as
``blacklist``: the objects of those kinds that a CR's run reads through the proxy reconcile
the CR when they change, runner/dependents/references.py), which operator-sdk does not have.

Where we differ on purpose:

* ``markUnsafe`` defaults to **true** (operator-sdk: false): a CR's spec must never be
  able to run Jinja in the operator.
* ``reconcilePeriod`` distinguishes "not set" (``None``: use the CLI default) from
  ``0`` (``0.0``: periodic reconciliation off).  operator-sdk treats 0 as "not set"
  and cannot turn periodic reconciliation off; a negative period, which it accepts
  and which silently disables requeueing there, is an error here.  A plain integer
  is taken as seconds (operator-sdk rejects it).
* Relative roles and playbooks are looked up from the watches file's directory, not
  from the process's working directory (the same thing in operator-sdk's images,
  where both are ``/opt/ansible``).  Role lookup order: absolute path; then
  ``<dir>/<name>``, ``<dir>/roles/<name>``, then ``<p>/<name>`` and
  ``<p>/roles/<name>`` for each ``p`` of ``roles_paths`` (``ANSIBLE_ROLES_PATH``).
  A name ``ns.coll.role`` is first looked up as a collection role under each
  collections directory (``ANSIBLE_COLLECTIONS_PATH`` or, when unset,
  ``~/.ansible/collections`` and ``/usr/share/ansible/collections``, then the Python
  path, which is where ansible-core also looks); such a role is kept as its FQCN.
* What operator-sdk lets through or only finds out later is an error at load time
  here, with a message naming the file, the entry and the key: a finalizer role or
  playbook that does not exist (accepted there when the finalizer has vars), an
  invalid label selector (fatal there when the controller starts), both ``role`` and
  ``playbook`` (it silently prefers the playbook), a blacklist entry without version
  or kind (it could never match anything).
* Undefined ``$NAME`` references are kept exactly as written (Go rewrites ``$NAME``
  as ``${NAME}``), and malformed ``${`` is kept rather than dropped.
* YAML with several documents is an error (operator-sdk reads the first one only);
  so are floating-point numbers in text fields (quote them) and one key written two
  ways in one entry (``role`` and ``Role``: operator-sdk keeps the last).
"""

from runner.util.durations import parse_go_duration
from runner.watches.envexpand import expand_env
from runner.watches.loader import load_watches
from runner.watches.model import (
    DEFAULT_MAX_RUNNER_ARTIFACTS,
    GVK,
    Admission,
    Convert,
    FieldMap,
    Finalizer,
    LoadResult,
    Watch,
    WatchesError,
)

__all__ = [
    "DEFAULT_MAX_RUNNER_ARTIFACTS",
    "GVK",
    "Admission",
    "Convert",
    "FieldMap",
    "Finalizer",
    "LoadResult",
    "Watch",
    "WatchesError",
    "expand_env",
    "load_watches",
    "parse_go_duration",
]
