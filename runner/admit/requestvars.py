"""The extra vars of an admission run: a reconcile's, of the object the request is about, and
the request itself under `admission` (pure).

As a reconcile run of that object gets them (runner/reconcile/extravars.py: the spec's keys
snake_cased, `ansible_operator_meta`, `_<group>_<kind>` and `_<group>_<kind>_spec`, the watch's
vars, markUnsafe as configured), where the object is the request's (on DELETE the old one);
then `admission` (operator-runner's): the AdmissionRequest's fields in snake_case, every string
from the request marked unsafe as the object's are; last, the `validate:`/`mutate:` vars.

```yaml
admission:
  uid: 705ab4f5-6393-11e8-b7cc-42010a800002
  operation: CREATE                     # UPDATE, DELETE, CONNECT
  kind: {group: swallowlab.com, version: v1alpha1, kind: EchoFlask}
  resource: {group: swallowlab.com, version: v1alpha1, resource: echoflasks}
  sub_resource: ""
  request_kind: {...}                   # what the client sent, when converted
  request_resource: {...}
  name: example-echoflask               # "" for a generateName create
  namespace: default
  user_info: {username: alice, uid: ..., groups: [...], extra: {...}}
  object: {...}                         # null on DELETE
  old_object: {...}                     # null on CREATE
  dry_run: false                        # kubectl apply --dry-run=server: true
  options: {...}                        # CreateOptions, UpdateOptions, DeleteOptions
```
"""

from __future__ import annotations

import copy
from typing import Any

from runner.admit.review import AdmissionRequest
from runner.reconcile.extravars import build_extra_vars, mark_unsafe
from runner.watches import Admission, Watch


def request_vars(request: AdmissionRequest) -> dict[str, Any]:
    """`admission`: the request's fields, snake_case keys (the objects as sent)."""
    return {
        "uid": request.uid,
        "operation": request.operation,
        "kind": dict(request.kind),
        "resource": dict(request.resource),
        "sub_resource": request.sub_resource,
        "request_kind": dict(request.request_kind),
        "request_resource": dict(request.request_resource),
        "name": request.name,
        "namespace": request.namespace,
        "user_info": dict(request.user_info),
        "object": request.object,
        "old_object": request.old_object,
        "dry_run": request.dry_run,
        "options": dict(request.options) if request.options else None,
    }


def admission_extra_vars(
    request: AdmissionRequest, watch: Watch, hook: Admission
) -> dict[str, Any]:
    """The extra vars of the run that answers `request` (see the module doc)."""
    result = build_extra_vars(request.subject, watch)
    admission = request_vars(request)
    result.pop("admission", None)  # a spec key `admission` gives way to the request
    result["admission"] = mark_unsafe(admission) if watch.mark_unsafe else copy.deepcopy(admission)
    for name, value in hook.vars.items():
        result.pop(name, None)
        result[name] = copy.deepcopy(value)
    return result
