"""Benchmarks of operator-runner against operator-sdk's ansible-operator. See README.md."""
