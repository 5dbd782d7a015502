#!/usr/bin/python
"""operator_sdk.util.admission: a role's answer to an admission webhook (operator-runner).

The work is done by the action plugin of the same name (plugins/action/admission.py), on the
controller, as ansible.builtin.set_fact's: no module is sent anywhere. This file holds the
documentation (ansible-doc) and refuses to run as a module.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: admission
short_description: Answer an admission webhook (allow, deny, warn, change the object)
version_added: "0.5.0"
author: operator-runner authors
description:
  - The answer of a role or playbook named by a watch's C(validate) or C(mutate) in
    watches.yaml, which operator-runner serves as an admission webhook. The runner reads this
    task's result and answers the API server.
  - Several calls add up, in order. Any C(allowed=false) denies (the messages are joined),
    warnings accumulate, and the last I(object) given is the changed object.
  - No call at all allows the request unchanged. A task that fails denies it, with the task's
    message.
  - Only for admission runs of operator-runner; elsewhere it only returns its arguments.
options:
  allowed:
    description: Whether the request may go on. C(false) denies it with I(message).
    type: bool
    default: true
  message:
    description:
      - Why the request is denied. The user sees it after the API server's own words, as in
        C(admission webhook "..." denied the request) followed by I(message).
      - Ignored when the request is allowed.
    type: str
  warnings:
    description:
      - Warnings shown to the user (kubectl prints each one after C(Warning)). At most 120
        characters each is best, as the API server may cut longer ones.
    type: list
    elements: str
    default: []
  object:
    description:
      - For C(mutate) the object as it should be stored, usually the request's object with
        changes (C(admission.object | combine(...))). The runner sends the API server a JSON
        patch from the request's object to this one.
      - Ignored by C(validate) runs.
    type: dict
"""

EXAMPLES = r"""
- name: Refuse a name that is taken by someone else's Deployment
  operator_sdk.util.admission:
    allowed: false
    message: "Deployment {{ name }}-deployment exists and is not owned by this EchoFlask"
  when: taken | length > 0

- name: Warn about a deprecated field
  operator_sdk.util.admission:
    warnings: ["spec.legacy is deprecated; use spec.modern"]
  when: admission.object.spec.legacy is defined

- name: Default a label from the namespace (mutate)
  operator_sdk.util.admission:
    object: >-
      {{ admission.object
         | combine({'metadata': {'labels': {'team': team}}}, recursive=True) }}
"""

RETURN = r"""
admission:
  description: The answer as operator-runner reads it.
  returned: always
  type: dict
  sample: {"allowed": false, "message": "the name is taken", "warnings": []}
"""

if __name__ == "__main__":
    import json
    import sys

    print(
        json.dumps(
            {
                "failed": True,
                "msg": "operator_sdk.util.admission runs as an action plugin on the controller "
                "(plugins/action/admission.py); it cannot run as a module",
            }
        )
    )
    sys.exit(1)
