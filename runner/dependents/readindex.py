"""Which CR read which object, and what that object looked like (pure): the index behind the
read-following watches (runner/dependents/references.py).

An object of a followed kind that a run of a CR reads through the proxy becomes one of that CR's
reads at once (a change seen while the run goes on reconciles the CR again after it), and stays
one until a later successful run of the CR no longer reads it (`settle`); a failed run adds its
reads and drops none (it may have stopped before the read it would have made). Per object one
fingerprint is kept, of what it was when last read, written or seen by a watch (None: it did not
exist), and the CRs that read it; per CR, the objects it read. Nothing else of the object.

Every call that learns an object's current fingerprint says which CRs read it as it was before
(their reads are outdated: reconcile them); the CR that reads or writes it itself is not among
them (its run sees what it read or wrote).
"""

from __future__ import annotations

#: A CR: group, kind, namespace ("" when cluster-scoped), name.
CrKey = tuple[str, str, str, str]
#: A resource: group, version, plural.
Res = tuple[str, str, str]
#: An object of a resource: namespace ("" when cluster-scoped), name.
ObjKey = tuple[str, str]
Fingerprint = bytes | None  # None: the object does not exist


class _Entry:
    """One object that CRs read: where it is (its own copy of the names), its fingerprint,
    its readers (one CR's key as it is, the usual case, or a set: a set costs 200 bytes)."""

    __slots__ = ("fingerprint", "name", "namespace", "readers", "res")

    def __init__(self, res: Res, key: ObjKey, fingerprint: Fingerprint) -> None:
        self.res = res
        self.namespace, self.name = key
        self.fingerprint = fingerprint
        self.readers: CrKey | set[CrKey] | None = None

    @property
    def item(self) -> tuple[Res, ObjKey]:
        return self.res, (self.namespace, self.name)

    @property
    def crs(self) -> list[CrKey]:
        readers = self.readers
        if readers is None:
            return []
        return list(readers) if isinstance(readers, set) else [readers]

    def add(self, cr: CrKey) -> None:
        readers = self.readers
        if readers is None or readers == cr:
            self.readers = cr
        elif isinstance(readers, set):
            readers.add(cr)
        else:
            self.readers = {readers, cr}

    def discard(self, cr: CrKey) -> bool:
        """Take `cr` off the readers; True when none is left."""
        readers = self.readers
        if isinstance(readers, set):
            readers.discard(cr)
            if len(readers) == 1:
                self.readers = next(iter(readers))
        elif readers == cr:
            self.readers = None
        return self.readers is None


class ReadIndex:
    def __init__(self) -> None:
        # resource -> namespace -> name -> entry: a watch of one namespace looks at its own
        self._objects: dict[Res, dict[str, dict[str, _Entry]]] = {}
        self._reads: dict[CrKey, set[_Entry]] = {}  # in effect
        self._running: dict[CrKey, set[_Entry]] = {}  # read by the run going on
        self._cr_keys: dict[CrKey, CrKey] = {}  # the CRs with reads, each key once
        self._res: dict[Res, Res] = {}  # each resource's key once

    # -- what runs do -----------------------------------------------------------------------

    def read(self, cr: CrKey, res: Res, key: ObjKey, fingerprint: Fingerprint) -> list[CrKey]:
        """A run of `cr` read the object (`fingerprint` as it read it); the other CRs whose
        reads of it are outdated."""
        cr = self._cr_keys.setdefault(cr, cr)
        entry = self._entry(res, key)
        outdated: list[CrKey] = []
        if entry is None:
            res = self._res.setdefault(res, res)
            entry = _Entry(res, key, fingerprint)
            self._objects.setdefault(res, {}).setdefault(key[0], {})[key[1]] = entry
        elif entry.fingerprint != fingerprint:
            outdated = [other for other in entry.crs if other != cr]
            entry.fingerprint = fingerprint
        entry.add(cr)
        self._reads.setdefault(cr, set()).add(entry)
        self._running.setdefault(cr, set()).add(entry)
        return outdated

    def wrote(self, cr: CrKey, res: Res, key: ObjKey, fingerprint: Fingerprint) -> list[CrKey]:
        """A run of `cr` wrote the object (it does not become one of its reads by that); the
        CRs whose reads of it are outdated, `cr` not among them."""
        entry = self._entry(res, key)
        if entry is None or entry.fingerprint == fingerprint:
            return []
        entry.fingerprint = fingerprint
        return [other for other in entry.crs if other != cr]

    def settle(self, cr: CrKey, succeeded: bool) -> list[tuple[Res, ObjKey]]:
        """The run of `cr` ended: after a success its reads are exactly the run's; the objects
        no CR reads any more (forgotten here)."""
        ran = self._running.pop(cr, set())
        if not succeeded:
            return []
        dropped = self._reads.get(cr, set()) - ran
        if ran:
            self._reads[cr] = ran
        else:
            self._reads.pop(cr, None)
            self._cr_keys.pop(cr, None)
        return [entry.item for entry in dropped if self._drop(cr, entry)]

    def forget(self, cr: CrKey) -> list[tuple[Res, ObjKey]]:
        """`cr` is gone (or not this replica's): none of its reads count; the objects no CR
        reads any more (forgotten here)."""
        self._running.pop(cr, None)
        self._cr_keys.pop(cr, None)
        return [entry.item for entry in self._reads.pop(cr, set()) if self._drop(cr, entry)]

    # -- what watches see -------------------------------------------------------------------

    def follows(self, res: Res, key: ObjKey) -> bool:
        """Did a CR read this object? (Most objects a watch sees it never did.)"""
        return self._entry(res, key) is not None

    def changed(self, res: Res, key: ObjKey, fingerprint: Fingerprint) -> list[CrKey]:
        """A watch saw the object as `fingerprint` (None: deleted, or absent from a listing);
        the CRs that read it otherwise."""
        entry = self._entry(res, key)
        if entry is None or entry.fingerprint == fingerprint:
            return []
        entry.fingerprint = fingerprint
        return entry.crs

    def keys(self, res: Res, namespace: str) -> list[ObjKey]:
        """The objects read in `namespace` ("": in every namespace, or cluster-scoped)."""
        namespaces = self._objects.get(res, {})
        chosen = [namespace] if namespace else list(namespaces)
        return [(ns, name) for ns in chosen for name in namespaces.get(ns, {})]

    def any_in(self, res: Res, namespace: str) -> bool:
        """Does a CR read an object of `res` in `namespace` ("": anywhere)?"""
        namespaces = self._objects.get(res, {})
        return bool(namespaces.get(namespace) if namespace else namespaces)

    def reads_of(self, cr: CrKey) -> set[tuple[Res, ObjKey]]:
        return {entry.item for entry in self._reads.get(cr, set())}

    def __len__(self) -> int:
        """How many objects are followed."""
        return sum(len(names) for ns in self._objects.values() for names in ns.values())

    # -- inside -----------------------------------------------------------------------------

    def _entry(self, res: Res, key: ObjKey) -> _Entry | None:
        return self._objects.get(res, {}).get(key[0], {}).get(key[1])

    def _drop(self, cr: CrKey, entry: _Entry) -> bool:
        """Take `cr` off the object's readers; True when it had no other (then forgotten)."""
        if not entry.discard(cr):
            return False
        namespaces = self._objects[entry.res]
        names = namespaces[entry.namespace]
        del names[entry.name]
        if not names:
            del namespaces[entry.namespace]
        if not namespaces:
            del self._objects[entry.res]
        return True
