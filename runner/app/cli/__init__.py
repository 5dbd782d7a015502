"""The command line: `operator-runner` (or `ansible-operator`) and its commands, flags and
environment, turned into the manager's configuration."""

from runner.app.cli.commands import main  # the console script (pyproject: runner.app.cli:main)

__all__ = ["main"]
