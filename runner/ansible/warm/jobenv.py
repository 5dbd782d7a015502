"""The names the operator and its fork server agree on: the environment variables a warm run
carries and the module client's file name. A module of its own, free of imports, so that the
operator (pool.py) loads none of the server's code."""

PLAYBOOK_SOCKET_ENV = "OPERATOR_RUNNER_PLAYBOOK_SOCKET"
MODULE_SOCKET_ENV = "OPERATOR_RUNNER_MODULE_SOCKET"
CLIENT_NAME = "python"  # the module client next to the socket (pool.WarmPool)
ANSIBALLZ_CACHE_ENV = "OPERATOR_RUNNER_ANSIBALLZ_CACHE"
TEMPLATE_CACHE_ENV = "OPERATOR_RUNNER_TEMPLATE_CACHE"
#: A run's file where a job records a patch that failed in it (patches/guard.py).
FAILURES_ENV = "OPERATOR_RUNNER_WARM_FAILURES"
#: Set in every job to its kind (playbook, module): the canary's proof that it ran warm.
JOB_ENV = "OPERATOR_RUNNER_WARM_JOB"
#: The server's start-up report, next to its sockets: the ansible-core version, the patches
#: installed and skipped, or the failure that sends runs to the plain path.
STATUS_FILE = "status.json"
#: Test-only: `PHASE:MODULE:ATTRIBUTE` renames that attribute (PHASE server: before the
#: patches are installed; job: in each job), as an ansible-core release that renamed a private
#: name would (patches/apply.py).
TEST_RENAME_ENV = "OPERATOR_RUNNER_WARM_TEST_RENAME"
WARM_LOOKUPS_ENV = "OPERATOR_RUNNER_WARM_LOOKUPS"  # lookup plugins a playbook job loads first
