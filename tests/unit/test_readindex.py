"""runner.dependents.readindex: which CR read which object, until a later run no longer reads it."""

from __future__ import annotations

import sys

from runner.dependents.readindex import ReadIndex

SECRETS = ("", "v1", "secrets")
A = ("x.io", "Echo", "ns", "a")
B = ("x.io", "Echo", "ns", "b")
DB = ("ns", "db")
TLS = ("other", "tls")


def test_a_read_follows_the_object_at_once_and_a_change_reconciles_its_reader() -> None:
    index = ReadIndex()
    assert index.read(A, SECRETS, DB, b"one") == []
    assert index.follows(SECRETS, DB) and not index.follows(SECRETS, TLS)
    assert index.changed(SECRETS, DB, b"one") == [], "the same object: nothing to do"
    assert index.changed(SECRETS, DB, b"two") == [A]
    assert index.changed(SECRETS, DB, b"two") == [], "told once"
    assert index.changed(SECRETS, DB, None) == [A], "deleted"


def test_an_object_that_was_missing_when_read_reconciles_its_reader_once_it_exists() -> None:
    index = ReadIndex()
    index.read(A, SECRETS, DB, None)
    assert index.changed(SECRETS, DB, None) == []
    assert index.changed(SECRETS, DB, b"created") == [A]


def test_a_read_of_a_newer_object_reconciles_the_others_that_read_it_before() -> None:
    index = ReadIndex()
    index.read(A, SECRETS, DB, b"one")
    assert index.read(B, SECRETS, DB, b"one") == []
    assert index.read(B, SECRETS, DB, b"two") == [A], "A read it as it was"
    assert index.changed(SECRETS, DB, b"two") == [], "the watch's event of it tells nothing new"


def test_a_write_reconciles_the_other_readers_not_the_writer() -> None:
    index = ReadIndex()
    index.read(A, SECRETS, DB, b"one")
    index.read(B, SECRETS, DB, b"one")
    assert sorted(index.wrote(A, SECRETS, DB, b"two")) == [B]
    assert index.changed(SECRETS, DB, b"two") == [], "the write's own event"
    assert index.wrote(A, SECRETS, TLS, b"x") == [], "not followed: nothing"
    assert not index.follows(SECRETS, TLS), "a write is not a read"


def test_a_successful_run_replaces_the_reads_a_failed_one_only_adds() -> None:
    index = ReadIndex()
    index.read(A, SECRETS, DB, b"one")
    index.read(A, SECRETS, TLS, b"t")
    assert index.settle(A, succeeded=True) == []
    index.read(A, SECRETS, TLS, b"t")  # the next run reads only TLS, and fails
    assert index.settle(A, succeeded=False) == []
    assert index.reads_of(A) == {(SECRETS, DB), (SECRETS, TLS)}
    index.read(A, SECRETS, TLS, b"t")  # and again, successfully
    assert index.settle(A, succeeded=True) == [(SECRETS, DB)], "DB is read by none now"
    assert index.reads_of(A) == {(SECRETS, TLS)}
    assert index.changed(SECRETS, DB, b"two") == [], "a dropped read triggers nothing"
    assert not index.follows(SECRETS, DB)


def test_an_object_stays_followed_while_one_cr_reads_it() -> None:
    index = ReadIndex()
    index.read(A, SECRETS, DB, b"one")
    index.read(B, SECRETS, DB, b"one")
    index.settle(A, succeeded=True)
    index.settle(B, succeeded=True)
    assert index.settle(A, succeeded=True) == [], "B still reads it"
    assert index.changed(SECRETS, DB, b"two") == [B]
    assert index.forget(B) == [(SECRETS, DB)]
    assert len(index) == 0 and not index.any_in(SECRETS, "")


def test_keys_and_scopes_by_namespace() -> None:
    index = ReadIndex()
    index.read(A, SECRETS, DB, b"1")
    index.read(A, SECRETS, TLS, b"2")
    assert index.keys(SECRETS, "ns") == [DB]
    assert sorted(index.keys(SECRETS, "")) == [DB, TLS]
    assert index.any_in(SECRETS, "other") and not index.any_in(SECRETS, "third")
    assert index.keys(("", "v1", "configmaps"), "") == []


def test_memory_per_followed_object_is_a_few_hundred_bytes() -> None:
    """10,000 CRs that each read two Secrets of their own: what the index keeps per read
    (entries, their names, the CRs' keys and sets), measured with sys.getsizeof."""
    index = ReadIndex()
    count = 10_000
    for i in range(count):
        cr = ("x.io", "Echo", f"ns-{i % 50}", f"cr-{i:05d}")
        index.read(cr, SECRETS, (cr[2], f"db-{i:05d}"), bytes(16))
        index.read(cr, SECRETS, (cr[2], f"tls-{i:05d}"), bytes(16))
        index.settle(cr, succeeded=True)
    assert len(index) == 2 * count
    per_read = _deep_size(index) / (2 * count)
    print(f"\n{per_read:.0f} bytes per followed read")
    assert per_read < 500, per_read


def _deep_size(obj: object, seen: set[int] | None = None) -> int:
    seen = set() if seen is None else seen
    if id(obj) in seen or obj is None or isinstance(obj, (bool, int)):
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(_deep_size(k, seen) + _deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, (set, frozenset, list, tuple)):
        size += sum(_deep_size(item, seen) for item in obj)
    elif hasattr(obj, "__slots__"):
        size += sum(_deep_size(getattr(obj, slot), seen) for slot in obj.__slots__)
    elif hasattr(obj, "__dict__"):
        size += _deep_size(vars(obj), seen)
    return size
