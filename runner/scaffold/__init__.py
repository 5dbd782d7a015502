"""Scaffolding for role authors: ``operator-runner init`` and ``operator-runner create api``.

``init`` writes a project in operator-sdk's Ansible layout (PROJECT, watches.yaml, roles/,
playbooks/, config/, molecule/, Dockerfile, Makefile: layout.py); ``create api`` adds a kind to
it: a CRD whose schema is inferred from a sample CR, the watches.yaml entry, a role or playbook,
the sample, and the kind's RBAC rules.

This package is pure: it imports the standard library, PyYAML and
``runner.reconcile.snakecase`` only (never kopf, ansible-runner, kubernetes or the runtime
modules of the runner), so the commands start fast and work without a cluster.
"""
