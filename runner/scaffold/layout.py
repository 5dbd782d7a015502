"""Where things are in a project: operator-sdk's Ansible layout (``operator-sdk init
--plugins=ansible``, PROJECT ``layout: [ansible.sdk.operatorframework.io/v1]``), which ``init``
writes and ``create api`` / ``create webhook`` extend, on a project either CLI made.

The scaffold markers are kubebuilder's (``# +kubebuilder:scaffold:<name>``): operator-sdk's
``create api`` inserts its additions right above them, and so does operator-runner's.
"""

from __future__ import annotations

from typing import Final

PROJECT_FILE: Final = "PROJECT"
# operator-sdk's Ansible plugin (the layout), and the plugins its `init` adds.
ANSIBLE_LAYOUT: Final = "ansible.sdk.operatorframework.io/v1"
MANIFESTS_PLUGIN: Final = "manifests.sdk.operatorframework.io/v2"
SCORECARD_PLUGIN: Final = "scorecard.sdk.operatorframework.io/v2"
# operator-runner's entry among PROJECT's plugins: the ansible-core line (ansibleCore).
RUNNER_PLUGIN: Final = "operator-runner.dev/v1"
# The layout of operator-runner's own init before it wrote operator-sdk's.
OLD_LAYOUT: Final = "operator-runner/v1"

WATCHES: Final = "watches.yaml"
CRD_BASES: Final = "config/crd/bases"
CRD_KUSTOMIZATION: Final = "config/crd/kustomization.yaml"
SAMPLES: Final = "config/samples"
SAMPLES_KUSTOMIZATION: Final = "config/samples/kustomization.yaml"
RBAC_ROLE: Final = "config/rbac/role.yaml"
RBAC_KUSTOMIZATION: Final = "config/rbac/kustomization.yaml"
WEBHOOK_MANIFESTS: Final = "config/webhook/manifests.yaml"
MOLECULE_TASKS: Final = "molecule/default/tasks"
# Folders a role author fills, kept in version control (and in the image's COPY) while empty.
PLACEHOLDERS: Final = ("roles/.placeholder", "playbooks/.placeholder")

# kubebuilder's markers, by file.
WATCH_MARKER: Final = "watch"
RULES_MARKER: Final = "rules"
CRD_MARKER: Final = "crdkustomizeresource"
SAMPLES_MARKER: Final = "manifestskustomizesamples"

# The operator-sdk release this layout is proven with (hack/sdk-cli.sh): the Makefile's
# OPERATOR_SDK_VERSION and the scorecard's test image.
SDK_VERSION: Final = "v1.31.0"
# kustomize and opm of the Makefile's `kustomize` and `opm` targets.
KUSTOMIZE_VERSION: Final = "v5.6.0"
OPM_VERSION: Final = "v1.23.0"


def marker(name: str) -> str:
    """The marker line of ``name`` in a YAML file."""
    return f"# +kubebuilder:scaffold:{name}"
