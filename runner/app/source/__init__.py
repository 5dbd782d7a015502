"""kopf as the source of watch events, adapted: the only importer of kopf (kopf_import.py)."""
