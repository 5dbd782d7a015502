"""The extra vars of a run, and the file that hands them to Ansible.

What operator-sdk does (``makeParameters`` in ``internal/ansible/runner/runner.go`` of
operator-framework/ansible-operator-plugins), later keys winning:

1. the keys of the CR's ``spec``, snake_cased recursively (``paramconv.MapToSnake``)
   when ``snakeCaseParameters`` is true, as they are otherwise; a missing ``spec``, or
   one that is not a mapping, counts as ``{}``;
2. ``ansible_operator_meta: {name, namespace}`` (``""`` when absent, e.g. the
   namespace of a cluster-scoped resource);
3. ``_<group>_<kind>``: the whole object, as is, where ``<kind>`` is lower-cased and
   every ``.`` and ``-`` of the key becomes ``_`` (``_app_my_domain_echo``).  The group
   is used as written, so a core kind gives a double underscore: ``__configmap``;
4. ``_<group>_<kind>_spec``: the spec as is (not snake_cased);
5. the watch's ``vars``;
6. on a finalizer run, the finalizer's ``vars``.

With ``markUnsafe`` it wraps every string *value* of items 1 and 4 as
``{"__ansible_unsafe": value}`` in the JSON it writes to ansible-runner's
``env/extravars``; keys, ``ansible_operator_meta`` and the whole object (item 3) are
left as they are.

What we do differently, on purpose:

* ``markUnsafe`` (true by default here, see :mod:`runner.watches`) marks **every**
  string that comes from the object: values at any depth and mapping keys, in items
  1 to 4, including the whole object, so ``{{ _app_my_domain_echo.spec.message }}``
  is as safe as ``{{ message }}``.  The watch's and the finalizer's ``vars`` are
  written by the operator author and are never marked: Jinja in them works.
* The extra vars are written as YAML, marked strings with the ``!unsafe`` tag, not
  as JSON.  Besides being Ansible's documented way, this keeps a CR from smuggling
  Ansible's JSON object hooks in: in JSON extra vars a CR mapping such as
  ``{"__ansible_vault": "..."}`` is decoded as a vaulted value (and fails the run), and
  ``{"__ansible_unsafe": ...}`` as a marked one; in YAML they are plain mappings.

What ansible-core 2.19 does, checked against 2.19.14 (``tests/unit/test_extravars.py``
runs ``ansible-playbook`` to prove it):

* extra vars read from a file (``-e @file``) are *trusted as templates*: a plain string
  ``"{{ lookup('pipe', 'id') }}"`` coming from a CR runs ``id`` on the operator and
  ``"{{ 7 * 6 }}"`` becomes ``42``.  That is operator-sdk's behaviour with
  ``markUnsafe: false``: anyone who may create the CR may run code in the operator.
* a string tagged ``!unsafe`` is not trusted and is printed literally, at any depth and
  whichever way it is reached; ``{"__ansible_unsafe": ...}`` in JSON still works too.
* but 2.19 gives an ``!unsafe`` scalar the type it would have unquoted: ``!unsafe "123"``
  loads as the integer 123, ``"yes"`` as True, ``""`` and ``"null"`` as None,
  ``"2024-01-02"`` as a date, and ``"="`` or ``"<<"`` fail the whole file.  Such text
  can hold no template, so :func:`render_extra_vars` writes it untagged, quoted, and it
  stays the string it was.
* mapping keys are not templated when a variable is used; we mark them anyway.

How to hand the text to Ansible (checked in ansible-runner 2.4.3,
``ansible_runner/config/runner.py`` and ``utils/__init__.py``):

* ansible-runner never parses ``<private_data_dir>/env/extravars`` itself: when the
  file exists it only adds ``-e @<absolute path>`` to the ansible-playbook command
  line.  So write :func:`render_extra_vars`' text there (or to any file and add
  ``-e @<path>`` through ``cmdline``).  ansible-runner's own loader (``yaml.safe_load``,
  used for ``env/settings``, ``env/envvars``, ``env/passwords``) would reject the
  ``!unsafe`` tag, but it is not used for ``env/extravars``.
* Do **not** pass the dict as ``extravars=``: ansible-runner ``json.dumps`` it into
  ``env/extravars`` (losing the marks; with ``suppress_env_files`` it goes on the
  command line as JSON instead), and if ``env/extravars`` already exists the dict is
  added as a second ``-e`` that wins over the file.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, cast

import yaml

from runner.reconcile.snakecase import snake_keys
from runner.watches import GVK, Watch

__all__ = [
    "UnsafeText",
    "build_extra_vars",
    "extra_vars_key",
    "mark_unsafe",
    "render_extra_vars",
]

UNSAFE_TAG = "!unsafe"


class UnsafeText(str):
    """A string Ansible must never template; rendered with the ``!unsafe`` tag."""

    __slots__ = ()


def mark_unsafe(value: Any) -> Any:
    """Copy ``value`` with every string, mapping keys included, made :class:`UnsafeText`.

    Mappings become dicts and tuples lists; other values are returned as they are.
    """
    if isinstance(value, str):
        return value if isinstance(value, UnsafeText) else UnsafeText(value)
    if isinstance(value, Mapping):
        return {mark_unsafe(key): mark_unsafe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [mark_unsafe(item) for item in value]
    return value


def extra_vars_key(gvk: GVK) -> str:
    """``_<group>_<kind>`` as operator-sdk names it: kind lower-cased, ``.``/``-`` -> ``_``.

    >>> extra_vars_key(GVK("swallowlab.com", "v1alpha1", "EchoFlask"))
    '_swallowlab_com_echoflask'
    >>> extra_vars_key(GVK("", "v1", "ConfigMap"))
    '__configmap'
    """
    key = f"_{gvk.group}_{gvk.kind.lower()}"
    return key.replace(".", "_").replace("-", "_")


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    """Set ``target[key]``, replacing the key object too (it may be a marked spec key)."""
    target.pop(key, None)
    target[key] = value


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return {"name": metadata.get("name") or "", "namespace": metadata.get("namespace") or ""}


def build_extra_vars(
    obj: Mapping[str, Any], watch: Watch, *, finalizing: bool = False
) -> dict[str, Any]:
    """The extra vars of a run of ``watch`` for the resource ``obj`` (see the module doc).

    When ``watch.mark_unsafe``, every string from ``obj`` is an :class:`UnsafeText`;
    the result shares nothing mutable with ``obj`` or ``watch``.
    """

    def from_object(value: Any) -> Any:
        return mark_unsafe(value) if watch.mark_unsafe else copy.deepcopy(value)

    spec = _spec(obj)
    parameters = snake_keys(spec) if watch.snake_case_parameters else dict(spec)
    result: dict[str, Any] = from_object(parameters)
    _put(result, "ansible_operator_meta", from_object(_meta(obj)))
    key = extra_vars_key(watch.gvk)
    _put(result, key, from_object(obj))
    _put(result, f"{key}_spec", from_object(spec))
    for name, value in watch.vars.items():
        _put(result, name, copy.deepcopy(value))
    if finalizing and watch.finalizer is not None:
        for name, value in watch.finalizer.vars.items():
            _put(result, name, copy.deepcopy(value))
    return result


#: libyaml's emitter when PyYAML has it (the same text as the Python one, ~3x faster: a
#: ConversionReview of 100 objects is 0.2 MB of extra vars), else PyYAML's own.
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _PlainDumper(_SafeDumper):  # type: ignore[valid-type,misc]
    """SafeDumper that never writes anchors/aliases and accepts tuples as lists."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


class _UnsafeDumper(_PlainDumper):
    """_PlainDumper writing :class:`UnsafeText` as ``!unsafe "..."``."""


# The resolver of Ansible's YAML loader (ansible/_internal/_yaml/_loader.py).
_ANSIBLE_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"
_TEMPLATE_MARKERS = ("{{", "{%", "{#")


def _untyped_text(text: str) -> bool:
    """True when ``text`` written as a plain YAML scalar would still be a string."""
    resolve = cast(
        Callable[[type[yaml.Node], str, tuple[bool, bool]], str], _ANSIBLE_RESOLVER.resolve
    )
    return resolve(yaml.ScalarNode, text, (True, False)) == _STR_TAG


def _represent_unsafe(dumper: yaml.SafeDumper, data: UnsafeText) -> yaml.ScalarNode:
    """``!unsafe "..."``, except for text that ansible-core would turn into another type.

    ansible-core 2.19 resolves the type of an ``!unsafe`` scalar as if it were plain,
    ignoring its quotes: ``!unsafe "123"`` loads as 123, ``"yes"`` as True, ``""`` as
    None, ``"2024-01-02"`` as a date, and ``"="`` or ``"<<"`` make the whole file fail to
    load.  Such text (numbers, booleans, null, dates; never a template) is written as
    an ordinary quoted string instead, which loads as the same string.
    """
    text = str(data)
    if not _untyped_text(text) and not any(marker in text for marker in _TEMPLATE_MARKERS):
        return dumper.represent_str(text)
    return dumper.represent_scalar(UNSAFE_TAG, text, style='"')


def _represent_plain(dumper: yaml.SafeDumper, data: UnsafeText) -> yaml.ScalarNode:
    return dumper.represent_str(str(data))


_PlainDumper.add_representer(tuple, yaml.SafeDumper.represent_list)
_PlainDumper.add_representer(UnsafeText, _represent_plain)
_UnsafeDumper.add_representer(UnsafeText, _represent_unsafe)


def render_extra_vars(extra_vars: Mapping[str, Any], *, mark_unsafe: bool = True) -> str:
    """The YAML text of ``extra_vars`` for ``ansible-playbook -e @<file>``.

    :class:`UnsafeText` strings (keys too) get the ``!unsafe`` tag, so Ansible never
    templates them; ``mark_unsafe=False`` writes them as plain strings instead
    (operator-sdk's ``markUnsafe: false``).  Write the text to
    ``<private_data_dir>/env/extravars`` for ansible-runner, never pass the dict as
    ansible-runner's ``extravars=`` (see the module doc).
    """
    dumper = _UnsafeDumper if mark_unsafe else _PlainDumper
    return yaml.dump(
        dict(extra_vars),
        Dumper=dumper,
        default_flow_style=False,
        sort_keys=False,
        allow_unicode=True,
        width=2**31 - 1,
    )
