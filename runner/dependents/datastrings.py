"""Numbers and booleans in a ConfigMap's or Secret's string maps, written as text (pure).

ansible-core 2.19 keeps the type a template produces: `'{{ (x | int) + 1 }}'` is now the
integer 6, where older ansible-core (the one operator-sdk's image shipped) rendered the text
"6". A ConfigMap's `data` (and a Secret's `data` and `stringData`) only holds strings, so the
API server refuses such a write (`cannot unmarshal number into Go struct field
ConfigMap.data of type string`) and roles that worked under operator-sdk fail. The roles'
proxy therefore turns the scalars the API would refuse into the text older Ansible produced:

- integers and floats: as Python prints them (`6`, `2.5`), which is what the template used to
  render;
- booleans: `"true"` / `"false"`. Older Ansible turned a rendered "True"/"False" back into a
  boolean, so the API refused those writes under operator-sdk as well: there is no older text
  to keep, and the lower-case spelling is the one JSON, YAML and `kubectl create configmap`
  use (`| string` in the template still gives "True").

Nothing else is touched: strings, nulls (the API takes them as empty), and lists or mappings
(refused by the API before and now; `| to_json` is the fix in the role).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from runner.dependents.ownership import RequestInfo

log = logging.getLogger("runner.proxy")

_STRING_MAPS = {"configmaps": ("data",), "secrets": ("data", "stringData")}


def as_text(value: Any) -> Any:
    """The text a scalar stands for in a string map; anything else unchanged."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _fix_map(mapping: Any) -> bool:
    if not isinstance(mapping, dict):
        return False
    changed = False
    for key, value in mapping.items():
        text = as_text(value)
        if text is not value:
            mapping[key] = text
            changed = True
    return changed


def _fix_object(obj: Any, fields: tuple[str, ...]) -> bool:
    if not isinstance(obj, dict):
        return False
    changed = False
    for field in fields:
        changed = _fix_map(obj.get(field)) or changed
    return changed


def _fix_json_patch(ops: list[Any], fields: tuple[str, ...]) -> bool:
    changed = False
    for op in ops:
        if not isinstance(op, dict) or op.get("op") not in ("add", "replace"):
            continue
        path = str(op.get("path", ""))
        parts = path.split("/")
        if len(parts) == 2 and parts[1] in fields:  # /data: the whole map
            changed = _fix_map(op.get("value")) or changed
        elif len(parts) == 3 and parts[1] in fields:  # /data/<key>: one value
            text = as_text(op.get("value"))
            if text is not op.get("value"):
                op["value"] = text
                changed = True
    return changed


def fix_body(info: RequestInfo | None, body: bytes) -> bytes:
    """`body` of a write (create, replace, any patch, apply as JSON) with the scalars of a
    ConfigMap's or Secret's string maps as text; unchanged when there are none."""
    if info is None or info.group != "" or info.subresource or not body:
        return body
    fields = _STRING_MAPS.get(info.plural)
    if fields is None:
        return body
    try:
        obj = json.loads(body)
    except ValueError:  # apply as YAML, or not JSON at all: as it is
        return body
    fixed = _fix_json_patch if isinstance(obj, list) else _fix_object
    changed = fixed(obj, fields)
    if not changed:
        return body
    log.debug(
        "%s %s/%s: numbers or booleans in %s written as text",
        info.plural,
        info.namespace,
        info.name,
        "/".join(fields),
    )
    return json.dumps(obj).encode()
