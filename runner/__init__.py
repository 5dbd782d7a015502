"""operator-runner: Kubernetes operators as Ansible roles, run by kopf and ansible-runner."""

__version__ = "0.1.0"
