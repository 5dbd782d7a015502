"""The operator's own HTTP endpoints: metrics, health probes, the roles' osdk_metric listener."""
