"""The app: command line, manager, production concerns (metrics, health, leader election,
bind addresses, cpus). The only package that imports kopf (kopf_import.py)."""
