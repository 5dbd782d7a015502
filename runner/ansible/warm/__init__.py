"""The warm executor: a fork server with Ansible already imported, its client, and the patches
of ansible-core's internals that make a run cheaper. The fence around everything that touches
ansible-core's private names (.importlinter keeps `ansible` imports in here).

Kept free of imports: the operator imports `pool` and `jobenv` without loading Ansible."""
