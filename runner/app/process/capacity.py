"""How many Ansible runs this process may have: at once per kind by default, and in flight in
all (from the CPUs and memory it may use, limits.py)."""

from __future__ import annotations

# What one Ansible run in flight costs in memory (ansible-playbook, its task worker and a module
# process; measured ~100 MB RSS on the plain path, less on the warm one), and what the operator
# itself needs besides.
RUN_MEMORY_BYTES = 120 * 1024 * 1024
BASE_MEMORY_BYTES = 200 * 1024 * 1024


def run_slots(memory_limit: int | None) -> int | None:
    """Ansible runs the whole operator may have in flight within its memory limit, all kinds
    together (None: no limit known)."""
    if memory_limit is None:
        return None
    return max(1, (memory_limit - BASE_MEMORY_BYTES) // RUN_MEMORY_BYTES)


def default_concurrency(cpus: int, memory_limit: int | None) -> int:
    """Runs at once by default: the usable CPUs, but no more than the memory limit can hold
    (operator-sdk takes the host's CPU count and gets OOM-killed under a pod's limit)."""
    slots = run_slots(memory_limit)
    return max(1, cpus if slots is None else min(cpus, slots))
