"""The warm executor's canary: a tiny playbook run through the warm client at its first start,
whose result proves the warm path before any CR's run takes it.

The playbook renders a template with a filter into a module's arguments, runs that module (a
module job of the module server: the module reports the job kind the server gave it), looks a
template up through a lookup plugin and reads the playbook job's own kind through another; the
last task's message must be exactly `EXPECTED` (with or without Jinja's native types, which a
user may have turned on before 2.19). Anything else (a failed task, a job that did not
run warm, another message) is a reason to take the plain path for good. Operator side: no
ansible import (the run goes through the executor, the result is read from its job events).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.ansible.warm.jobenv import JOB_ENV

IDENT = "canary"
PLAYBOOK = f"""---
- hosts: localhost
  gather_facts: false
  vars:
    words: [c, a, b]
  tasks:
    - name: canary module
      warm_canary:
        text: "{{{{ words | sort | join(',') }}}}"
      register: module
    - name: canary lookup
      ansible.builtin.set_fact:
        looked_up: "{{{{ lookup('ansible.builtin.template', 'canary.j2') | trim }}}}"
    - name: canary result
      ansible.builtin.debug:
        msg: "{{{{ module.job }}}} {{{{ module.text }}}} {{{{ looked_up }}}} {{{{ job }}}}"
      vars:
        job: "{{{{ lookup('ansible.builtin.env', '{JOB_ENV}') }}}}"
"""
MODULE = f"""#!/usr/bin/python
import os

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={{"text": {{"type": "str", "required": True}}}})
    module.exit_json(changed=False, text=module.params["text"], job=os.environ.get({JOB_ENV!r}, ""))


main()
"""
TEMPLATE = "{{ 2 * 3 }}\n"
#: The module job and the playbook job ran warm; the filter, the template and the lookups gave
#: what plain Ansible gives.
EXPECTED = "module a,b,c 6 playbook"


def write_project(folder: Path) -> Path:
    """The canary's playbook (with its module and template) in `folder`; its path."""
    (folder / "library").mkdir(parents=True, mode=0o700)
    (folder / "templates").mkdir(mode=0o700)
    (folder / "library" / "warm_canary.py").write_text(MODULE, encoding="utf-8")
    (folder / "templates" / "canary.j2").write_text(TEMPLATE, encoding="utf-8")
    playbook = folder / "canary.yml"
    playbook.write_text(PLAYBOOK, encoding="utf-8")
    return playbook


def verdict(status: str, artifacts: Path) -> str | None:
    """None when the canary's run (ansible-runner `status`, its artifact folder) gave the
    expected result; else what went wrong."""
    results: dict[str, Any] = {}
    failed: list[str] = []
    for path in sorted((artifacts / "job_events").glob("*.json")):
        try:
            event = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_ok":
            results[str(data.get("task"))] = data.get("res") or {}
        elif event.get("event") in ("runner_on_failed", "runner_on_unreachable"):
            res = data.get("res") or {}
            failed.append(f"{data.get('task')}: {str(res.get('msg') or res)[:300]}")
    if failed:
        return f"the canary run failed: {'; '.join(failed)}"
    message = (results.get("canary result") or {}).get("msg")
    if status != "successful" or message is None:
        return f"the canary run ended {status} without its result"
    if message != EXPECTED:
        return f"the canary run gave {message!r} instead of {EXPECTED!r}"
    return None
