"""The app: the command line (cli/), the manager that builds, runs and stops the operator
(manager/), and below it kopf as the source of watch events (source/), leader election and
sharding on Leases (leases/), the operator's endpoints (serving/) and what the process may use
(process/). The only package that imports kopf (source/kopf_import.py)."""
