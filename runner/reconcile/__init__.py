"""Reconcile: one reconcile of one CR (reconciler.py), its status conditions, annotations,
extra vars and Events."""
