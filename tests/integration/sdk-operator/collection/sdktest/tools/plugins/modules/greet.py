#!/usr/bin/python
"""sdktest.tools.greet: a greeting, from a collection installed by ansible-galaxy."""

from __future__ import annotations

DOCUMENTATION = r"""
module: greet
short_description: Return a greeting
description: Returns C(Hello, <name>!) and the version of the collection it comes from.
options:
  name:
    description: Who to greet.
    type: str
    required: true
author: operator-runner's integration tests
"""

RETURN = r"""
message:
  description: The greeting.
  type: str
  returned: always
collection_version:
  description: The version of sdktest.tools that answered.
  type: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402 (after the docs, as modules do)

VERSION = "1.0.0"


def main() -> None:
    module = AnsibleModule(
        argument_spec={"name": {"type": "str", "required": True}}, supports_check_mode=True
    )
    module.exit_json(
        changed=False, message=f"Hello, {module.params['name']}!", collection_version=VERSION
    )


if __name__ == "__main__":
    main()
