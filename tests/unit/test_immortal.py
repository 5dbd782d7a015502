"""runner/ansible/immortal.py: preloaded objects made immortal, their pages left shared."""

from __future__ import annotations

import sys

import fresh_python
import pytest

from runner.ansible.warm.patches import immortal

needs_immortal = pytest.mark.skipif(
    not immortal.supported(), reason="immortal objects: CPython 3.12 and 3.13, 64-bit, GIL"
)


@needs_immortal
def test_everything_reached_is_immortal_and_still_works() -> None:
    out = fresh_python.run("""
        import sys
        from runner.ansible.warm.patches import immortal
        def greet(name, greeting="hello"):
            return f"{greeting} {name}" + "!" * 2
        table = {"names": ["a" + str(i) for i in range(100)], "greet": greet, (1, 2.5): {3}}
        count = immortal.immortalize([table])
        inner = table["names"]
        assert count >= 100 + 4, count
        for obj in (table, inner, inner[7], greet, greet.__code__, table[(1, 2.5)]):
            before = sys.getrefcount(obj)
            assert before >= immortal.IMMORTAL, (obj, before)
            more = [obj] * 10  # new references are not counted
            assert sys.getrefcount(obj) == before
            del more
        assert greet("x") == "hello x!!" and greet.__defaults__ == ("hello",)
        table["names"].append("b")  # still mutable
        del table["greet"]
        assert len(inner) == 101 and "greet" not in table
        assert immortal.immortalize([table]) == 0  # an immortal object counts as done
        print("ok")
        """)
    assert out == "ok"


@needs_immortal
def test_a_forked_child_uses_them_without_copying_their_pages() -> None:
    """The child reads every string of a 40 MB list: with the list immortal, it faults far
    fewer pages than the same walk over a list it has not been told about."""
    out = fresh_python.run("""
        import os, resource
        from runner.ansible.warm.patches import immortal

        def faults_of_a_child_that_reads(items):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                for item in items:
                    alias = item  # a reference taken and dropped: a write, when counted
                after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                os.write(w, str(after - before).encode())
                os._exit(0)
            os.waitpid(pid, 0)
            return int(os.read(r, 64))

        counted = ["x" * 100 + str(i) for i in range(300_000)]
        shared = ["y" * 100 + str(i) for i in range(300_000)]
        immortal.immortalize([shared])
        print(faults_of_a_child_that_reads(counted), faults_of_a_child_that_reads(shared))
        """)
    counted, shared = (int(x) for x in out.split())
    assert counted > 5000, counted  # ~40 MB of pages, each copied
    assert shared < counted / 10, (counted, shared)


def test_other_interpreters_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "version_info", (3, 11, 9, "final", 0))
    assert not immortal.supported()
    assert immortal.immortalize([{"a": [1, 2]}]) == 0
