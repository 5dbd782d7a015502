#!/usr/bin/python
"""operator_sdk.util.conversion: the documentation of the action plugin of the same name.

The answer of a convert role is handled by plugins/action/conversion.py in the playbook's own
process; this module only documents it (`ansible-doc operator_sdk.util.conversion`) and fails
if it is ever run as a module.
"""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped,unused-ignore]

DOCUMENTATION = r"""
module: conversion
short_description: Answer a conversion run with the objects in the version asked for
version_added: "0.5.0"
author: operator-runner authors
description:
  - The answer of a role or playbook named by a watch's C(convert:) key in operator-runner's
    watches.yaml, which operator-runner runs for every ConversionReview the API server sends to
    the operator's C(/convert) webhook (operator-sdk has no conversion).
  - The run gets C(conversion.objects) (the objects to convert, each in the version it is
    stored in), C(conversion.desired_api_version) (e.g. C(example.com/v1beta1)) and
    C(conversion.desired_version) (C(v1beta1)). Call this module with every object, converted,
    in one task (C(objects)) or in a loop (C(object)); the answers may come in any order.
  - operator-runner sets each answered object's C(apiVersion) to the desired one and keeps its
    metadata as it came, but for C(labels) and C(annotations), which a conversion may change.
  - A failed task fails the conversion; the API server shows its message to whoever asked.
  - Runs in the playbook's own process (an action plugin): no module process per answer.
options:
  object:
    description: One converted object.
    type: dict
  objects:
    description: A list of converted objects.
    type: list
    elements: dict
"""

EXAMPLES = r"""
- name: The objects in the version asked for (spec.size of v1alpha1 is spec.replicas of v1beta1)
  operator_sdk.util.conversion:
    object: >-
      {{ item | combine({'apiVersion': conversion.desired_api_version,
                         'spec': item.spec | dict2items | rejectattr('key', 'eq', old)
                                 | items2dict | combine({new: item.spec[old]})}) }}
  loop: "{{ conversion.objects }}"
  loop_control:
    label: "{{ item.metadata.name }}"
  vars:
    names: {v1alpha1: size, v1beta1: replicas}
    old: "{{ names[item.apiVersion.split('/') | last] }}"
    new: "{{ names[conversion.desired_version] }}"
"""

RETURN = r"""
answered:
  description: How many objects this task answered.
  returned: success
  type: int
  sample: 1
"""


def main() -> None:
    module = AnsibleModule(
        argument_spec={"object": {"type": "dict"}, "objects": {"type": "list", "elements": "dict"}}
    )
    module.fail_json(
        msg="operator_sdk.util.conversion is an action plugin; it ran as a module, so the "
        "collection's plugins/action folder was not found"
    )


if __name__ == "__main__":
    main()
