"""The admission bench's project: its roles, watches.yaml and CRDs (see bench/admission.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .cluster import ANY_OBJECT, crd_body, crd_version

GROUP = "bench.operator-runner.dev"
ROLE = """---
- name: Refuse a target whose Deployment exists (one lookup, one answer)
  operator_sdk.util.admission:
    allowed: false
    message: "Deployment {{ target }} exists"
  when: >-
    query('kubernetes.core.k8s', api_version='apps/v1', kind='Deployment',
          namespace=ansible_operator_meta.namespace, resource_name=target) | length > 0
"""
PROBE_ROLE = """---
- name: Nothing to do
  ansible.builtin.debug:
    msg: probe
  changed_when: false
"""
WATCHES = f"""---
- version: v1
  group: {GROUP}
  kind: Guard
  role: noop
  validate:
    role: admit_lookup
- version: v1
  group: {GROUP}
  kind: Probe
  role: noop
"""


def crd(kind: str, cel: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "type": "object",
        "properties": {"target": {"type": "string"}},
    }
    if cel:
        spec["x-kubernetes-validations"] = [
            {"rule": "self.target != 'taken'", "message": "spec.target is taken"}
        ]
    schema = {"type": "object", "properties": {"spec": spec, "status": ANY_OBJECT}}
    return crd_body(GROUP, kind, [crd_version("v1", schema)])


def write_project(work: Path) -> Path:
    for name, text in (("admit_lookup", ROLE), ("noop", PROBE_ROLE)):
        tasks = work / "roles" / name / "tasks"
        tasks.mkdir(parents=True)
        (tasks / "main.yml").write_text(text)
    (work / "watches.yaml").write_text(WATCHES)
    return work / "watches.yaml"
