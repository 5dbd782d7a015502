"""The manager: builds the operator's pieces from its configuration, runs them and stops them
(`operator-runner run`), or runs one reconcile (`operator-runner reconcile`)."""
