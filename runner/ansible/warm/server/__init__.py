"""The fork server: preloading, serving jobs, its process."""
