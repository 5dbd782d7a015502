"""What this process may use: CPUs and memory (affinity, cgroups), and the runs they allow."""
