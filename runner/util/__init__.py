"""Util: small shared things that depend on nothing else in the runner."""
