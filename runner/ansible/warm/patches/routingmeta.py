"""Collections' routing metadata parsed by the fork server without leaving its heap fragmented.

The first plugin the server looks up makes Ansible's collection loader parse ansible.builtin's
routing (`ansible/config/ansible_builtin_runtime.yml`, ~9700 lines: where each of ~4800 moved
modules and plugins went) with PyYAML. The parse builds a node graph (with reference cycles)
beside the ~2 MB of strings, dicts and lists it keeps, and the kept objects end up spread over
the arenas the graph used: once the graph is freed, those arenas stay mostly empty but
resident: 3.3 MB of the running server's RSS (5.8 MB in a process that loads Ansible alone), in
the server and its every job, for nothing.

While the server warms its plugins (`compacted()`), each collection's metadata is parsed as
Ansible parses it, serialised, the parse's garbage collected, and the copy read back: the copy
is allocated in one stretch, the parse's arenas are emptied and given back. The function Ansible
calls is restored afterwards, so jobs parse any other collection's metadata the usual way.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def compacted() -> Iterator[None]:
    """Inside: collection metadata is kept as a compact copy of what Ansible's parse gives."""
    from ansible.utils.collection_loader import _collection_finder as finder

    original = finder._meta_yml_to_dict
    if original is None:  # Ansible without PyYAML: nothing is parsed
        yield
        return

    def meta_yml_to_dict(yaml_string_data: bytes | str, content_id: Any) -> Any:
        parsed = original(yaml_string_data, content_id)
        try:
            raw = marshal.dumps(parsed)
        except ValueError:  # a type marshal does not know (another parser): keep the parse's
            return parsed
        del parsed
        gc.collect()  # the parse's node graph holds cycles: freed before the copy is made
        return marshal.loads(raw)

    finder._meta_yml_to_dict = meta_yml_to_dict
    try:
        yield
    finally:
        finder._meta_yml_to_dict = original


_ORIGINAL: list[Any] = []


def install() -> None:
    """The target is there (the compaction itself runs around the plugin warm-up)."""
    from ansible.utils.collection_loader import _collection_finder as finder

    _ORIGINAL[:] = [finder._meta_yml_to_dict]


def check() -> None:
    from ansible.utils.collection_loader import _collection_finder as finder

    if finder._meta_yml_to_dict is not _ORIGINAL[0]:
        raise AssertionError("_meta_yml_to_dict was not restored")
    import importlib

    builtin = importlib.import_module("ansible_collections.ansible.builtin")
    meta = getattr(builtin, "_collection_meta", None)
    if not isinstance(meta, dict) or "plugin_routing" not in meta:
        raise AssertionError("ansible.builtin's routing metadata is not Ansible's")
