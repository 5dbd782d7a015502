"""The names the operator and its fork server agree on: the environment variables a warm run
carries and the module client's file name. A module of its own, free of imports, so that the
operator (warm.py) loads none of the server's code."""

PLAYBOOK_SOCKET_ENV = "OPERATOR_RUNNER_PLAYBOOK_SOCKET"
MODULE_SOCKET_ENV = "OPERATOR_RUNNER_MODULE_SOCKET"
CLIENT_NAME = "python"  # the module client next to the socket (warm.WarmPool)
ANSIBALLZ_CACHE_ENV = "OPERATOR_RUNNER_ANSIBALLZ_CACHE"
TEMPLATE_CACHE_ENV = "OPERATOR_RUNNER_TEMPLATE_CACHE"
