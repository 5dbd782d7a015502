"""Ansible: runs a role or playbook for the reconciler (interface.py is what it sees). The only
package that imports ansible_runner, and the one that knows the collections search path.

Kept free of imports: the fork server (python -m runner.ansible.warm.server.forkserver) and
the command line import modules of this package without loading ansible_runner."""
