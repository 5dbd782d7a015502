"""Reconcile: one reconcile of one CR (reconciler.py, seen by the controllers through
interface.py), its status conditions, annotations, extra vars and Events."""
