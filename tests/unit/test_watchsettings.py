"""The per-watch settings read from operator-sdk's environment: MAX_CONCURRENT_RECONCILES_ and
WORKER_<KIND>_<GROUP>, ANSIBLE_VERBOSITY_<KIND>_<GROUP>, ANSIBLE_DEBUG_LOGS, ANSIBLE_GATHERING."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.app.manager.config import OperatorConfig
from runner.app.manager.watchsettings import (
    debug_logs,
    kind_env_name,
    watch_options,
    watch_workers,
)
from runner.watches import Watch, load_watches


@pytest.fixture
def watch(tmp_path: Path) -> Watch:
    (tmp_path / "roles" / "memcached" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "memcached" / "tasks" / "main.yml").write_text(
        "- ansible.builtin.meta: noop\n"
    )
    path = tmp_path / "watches.yaml"
    path.write_text(
        "- group: cache.example.com\n  version: v1\n  kind: Memcached\n  role: memcached\n"
    )
    (loaded,) = load_watches(path, environ={}).watches
    return loaded


def config(tmp_path: Path, workers: int | None = None, verbosity: int = 2) -> OperatorConfig:
    return OperatorConfig(
        watches_file=tmp_path / "watches.yaml",
        max_concurrent_reconciles=workers,
        verbosity=verbosity,
    )


def test_the_per_kind_name_is_operator_sdks(watch: Watch) -> None:
    assert kind_env_name("WORKER", watch) == "WORKER_MEMCACHED_CACHE_EXAMPLE_COM"


def test_workers_from_the_environment_before_the_flag(watch: Watch, tmp_path: Path) -> None:
    flag = config(tmp_path, workers=3)
    assert watch_workers(flag, watch, {}) == 3
    assert watch_workers(flag, watch, {"WORKER_MEMCACHED_CACHE_EXAMPLE_COM": "5"}) == 5
    both = {
        "MAX_CONCURRENT_RECONCILES_MEMCACHED_CACHE_EXAMPLE_COM": "7",
        "WORKER_MEMCACHED_CACHE_EXAMPLE_COM": "5",
    }
    assert watch_workers(flag, watch, both) == 7
    assert watch_workers(flag, watch, {"WORKER_OTHER_CACHE_EXAMPLE_COM": "9"}) == 3


@pytest.mark.parametrize(
    ("value", "says"),
    [("many", "is not an integer"), ("0", "must be between 1 and 10000")],
)
def test_a_bad_worker_count_stops_start_up_with_one_line(
    watch: Watch, tmp_path: Path, value: str, says: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        watch_workers(config(tmp_path), watch, {"WORKER_MEMCACHED_CACHE_EXAMPLE_COM": value})
    message = str(stopped.value)
    assert "WORKER_MEMCACHED_CACHE_EXAMPLE_COM" in message and says in message
    assert "\n" not in message


def test_verbosity_per_kind_and_the_run_options(watch: Watch, tmp_path: Path) -> None:
    flag = config(tmp_path, verbosity=2)
    assert watch_options(flag, watch, {}).verbosity == 2
    environ = {"ANSIBLE_VERBOSITY_MEMCACHED_CACHE_EXAMPLE_COM": "4"}
    assert watch_options(flag, watch, environ).verbosity == 4
    with pytest.raises(SystemExit):
        watch_options(flag, watch, {"ANSIBLE_VERBOSITY_MEMCACHED_CACHE_EXAMPLE_COM": "8"})
    assert watch_options(flag, watch, {}).skip_facts is False
    assert watch_options(flag, watch, {"ANSIBLE_GATHERING": "explicit"}).skip_facts is True
    assert watch_options(flag, watch, {"ANSIBLE_GATHERING": "smart"}).skip_facts is False


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, False), ("true", True), ("1", True), ("T", True), ("false", False), ("yes", False)],
)
def test_debug_logs_read_as_go_parses_a_boolean(raw: str | None, expected: bool) -> None:
    assert debug_logs({} if raw is None else {"ANSIBLE_DEBUG_LOGS": raw}) is expected
