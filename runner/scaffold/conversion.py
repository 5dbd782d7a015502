"""``create webhook --convert``: a conversion webhook for a kind with several versions.

The hook that `create webhook` calls for ``--convert`` (webhook.py); what it writes (the
``convert:`` role or field map, the CRD's ``spec.conversion``) comes with the conversion webhooks
of issue 28. Until then it refuses, saying so, and nothing is written.
"""

from __future__ import annotations

from .names import ScaffoldError
from .render import Plan

__all__ = ["plan_conversion"]


def plan_conversion(plan: Plan, group: str, version: str, kind: str) -> None:
    """Add the conversion webhook's files for ``kind`` to ``plan`` (nothing written yet)."""
    raise ScaffoldError(
        f"--convert: conversion webhooks ({kind} of {group}) are not scaffolded yet; use "
        "--validate and --mutate"
    )
