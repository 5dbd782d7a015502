"""Kube: the only code that builds API paths and talks to the API server (credentials,
resources, requests, the client, list and watch)."""
