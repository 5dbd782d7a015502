"""The extra vars of a conversion run (pure)::

    conversion:
      uid: 705ab4f5-6393-11e8-b7cc-42010a800002      # the ConversionReview's
      desired_api_version: swallowlab.com/v1beta1
      desired_version: v1beta1
      objects: [...]                                 # as the API server sent them

then the watch's `vars` and the convert's `vars` (later ones winning). The objects' strings are
marked unsafe as the watch's markUnsafe says (runner/reconcile/extravars.py), so Jinja in a CR
is never evaluated by a convert role either.
"""

from __future__ import annotations

import copy
from typing import Any

from runner.convert.review import ConversionRequest
from runner.reconcile.extravars import mark_unsafe
from runner.watches import Watch


def conversion_vars(watch: Watch, request: ConversionRequest) -> dict[str, Any]:
    """The extra vars of a conversion run of `watch` for `request` (see the module)."""
    objects = mark_unsafe(request.objects) if watch.mark_unsafe else copy.deepcopy(request.objects)
    result: dict[str, Any] = {
        "conversion": {
            "uid": request.uid,
            "desired_api_version": request.desired_api_version,
            "desired_version": request.desired_version,
            "objects": objects,
        }
    }
    own = watch.convert.vars if watch.convert is not None else {}
    for name, value in [*watch.vars.items(), *own.items()]:
        result.pop(name, None)
        result[name] = copy.deepcopy(value)
    return result
