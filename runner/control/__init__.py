"""Control: controllers (workers), the work queue, backoff, triggers and selectors, and the
metrics interface the controllers record into."""
