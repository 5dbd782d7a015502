"""The fork server's preloaded objects made immortal (PEP 683) before it forks jobs.

A forked job shares the server's memory copy-on-write, but CPython writes to every object it
uses: each reference taken or dropped changes the object's reference count, so the first use
of an object in a job copies its 4 KB page. A run's playbook job, task workers and module jobs
copied much of the server's ~50 MB that way, and the page faults, copies and teardown were a
third of a run's CPU, in the kernel. From CPython 3.12 an object whose reference count is the
immortal value is never counted: `Py_INCREF` and `Py_DECREF` leave it alone, so its page stays
shared. `immortalize` sets that value on everything the server holds, once, after preloading
(`gc.freeze` then keeps the collector from writing to them either).

Immortal objects are never freed: in the server they live as long as it does anyway, and a job
that drops one only leaves it in place until the job exits. Only for CPython 3.12 and 3.13 on
64-bit builds with the GIL, whose immortal reference count is the lower 32 bits set (other
builds: nothing is done).
"""

from __future__ import annotations

import ctypes
import gc
import sys
import types
from collections.abc import Iterable

IMMORTAL = 0xFFFFFFFF  # _Py_IMMORTAL_REFCNT, CPython 3.12 and 3.13, 64-bit


def supported() -> bool:
    return (
        sys.implementation.name == "cpython"
        and sys.version_info[:2] in ((3, 12), (3, 13))
        and sys.maxsize > 2**32
        and getattr(sys, "_is_gil_enabled", lambda: True)()
    )


def immortalize(roots: Iterable[object]) -> int:
    """Make `roots` and everything they reach immortal; the number of objects changed (0 when
    the interpreter is not one `supported` names). An object immortal already is not walked
    again: call it once, when everything to keep is in place."""
    if not supported():
        return 0
    stack = list(roots)
    count = 0
    getrefcount = sys.getrefcount
    while stack:
        obj = stack.pop()
        if getrefcount(obj) >= IMMORTAL:  # done already, or immortal from the start
            continue
        ctypes.c_ssize_t.from_address(id(obj)).value = IMMORTAL
        count += 1
        if isinstance(obj, types.CodeType):  # not a container for the collector
            stack.extend(obj.co_consts)
            stack.extend(obj.co_names)
            # Stored attributes only: co_code and co_varnames are built anew on each read.
            stack.extend((obj.co_linetable, obj.co_exceptiontable, obj.co_name, obj.co_qualname))
            stack.append(obj.co_filename)
        else:
            stack.extend(gc.get_referents(obj))
    return count


def install() -> bool:
    """Everything the server holds, once it is all in place (the last step before it serves)."""
    if not supported():
        return False
    gc.collect()
    immortalize(gc.get_objects())
    return True


def check() -> None:
    if sys.getrefcount(sys.modules) < IMMORTAL:
        raise AssertionError("the preloaded objects are not immortal")
