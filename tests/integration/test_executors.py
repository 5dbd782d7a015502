"""The warm executor behaves as the plain one: what a playbook finds around it (its inventory's
group_vars/ and host_vars/, its own, a project ansible.cfg, a library/ module and its
module_utils/) gives the same result on both paths. Real ansible-runner runs, no cluster."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.ansible.executor import Executor
from runner.ansible.interface import RunRequest

# every line: the warm executor's patches differ per ansible-core line
pytestmark = pytest.mark.lines

EXECUTORS = ["warm", "plain"]


def _run(executor: Executor, private: Path, playbook: Path, ident: str) -> dict[str, object]:
    """Run `playbook`; the `msg` of each debug task, by task name. The run must succeed."""
    request = RunRequest(private_dir=private, ident=ident, playbook=playbook, extravars_text="{}")
    result = executor.run_sync(request)
    assert result.ok, (ident, result.status, result.stdout_tail)
    messages = {}
    for path in sorted((private / "artifacts" / ident / "job_events").glob("*.json")):
        event = json.loads(path.read_text())
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_ok" and "msg" in (data.get("res") or {}):
            messages[str(data.get("task"))] = data["res"]["msg"]
    return messages


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.fixture(scope="module", params=EXECUTORS)
def executor(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Executor]:
    """One executor of each kind for the module's tests; the warm one must stay warm."""
    tmp = tmp_path_factory.mktemp("executor")
    executor = Executor(roles_paths=[], tmp_dir=tmp / "tmp", warm=request.param == "warm")
    try:
        yield executor
        _warm_as_asked(executor, request.param)
    finally:
        executor.close()


def _warm_as_asked(executor: Executor, kind: str) -> None:
    assert executor.warm_running == (kind == "warm"), "the warm executor did not come up"


@pytest.mark.parametrize("kind", EXECUTORS)
def test_an_inventorys_group_and_host_vars(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ANSIBLE_INVENTORY naming a folder with `hosts` and group_vars/ + host_vars/ (as
    operator-sdk's advanced-molecule): the warm executor's server had primed no vars plugin,
    so its runs found these variables undefined."""
    _write(
        tmp_path / "inventory",
        {
            "hosts": f"[grouped]\nlocalhost ansible_connection=local "
            f"ansible_python_interpreter={sys.executable}\n",
            "group_vars/grouped.yml": "from_group_vars: group\n",
            "host_vars/localhost.yml": "from_host_vars: host\n",
        },
    )
    _write(
        tmp_path / "project",
        {
            "main.yml": "- hosts: grouped\n  gather_facts: false\n  tasks:\n"
            "    - name: vars\n      debug:\n"
            "        msg: \"{{ from_group_vars | default('unset') }} "
            "{{ from_host_vars | default('unset') }}\"\n",
        },
    )
    monkeypatch.setenv("ANSIBLE_INVENTORY", str(tmp_path / "inventory"))
    executor = Executor(roles_paths=[], tmp_dir=tmp_path / "tmp", warm=kind == "warm")
    try:
        messages = _run(executor, tmp_path / "private", tmp_path / "project" / "main.yml", "inv")
        _warm_as_asked(executor, kind)
    finally:
        executor.close()
    assert messages == {"vars": "group host"}


def test_a_playbooks_own_group_and_host_vars(executor: Executor, tmp_path: Path) -> None:
    _write(
        tmp_path / "project",
        {
            "group_vars/all.yml": "from_group_vars: group\n",
            "host_vars/localhost.yml": "from_host_vars: host\n",
            "main.yml": "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
            "    - name: vars\n      debug:\n"
            "        msg: \"{{ from_group_vars | default('unset') }} "
            "{{ from_host_vars | default('unset') }}\"\n",
        },
    )
    messages = _run(executor, tmp_path / "private", tmp_path / "project" / "main.yml", "own")
    assert messages == {"vars": "group host"}


def test_a_project_ansible_cfg(executor: Executor, tmp_path: Path) -> None:
    """ansible-playbook runs in the project folder and reads its ansible.cfg: the server had
    set its plugin loaders up with its own configuration (a job is handed back now)."""
    _write(
        tmp_path / "project",
        {
            "ansible.cfg": "[defaults]\nfilter_plugins = ./more_filters\n",
            "more_filters/shout.py": "class FilterModule:\n    def filters(self):\n"
            "        return {'shout': lambda v: str(v).upper() + '!'}\n",
            "main.yml": "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
            "    - name: filtered\n      debug:\n        msg: \"{{ 'hi' | shout }}\"\n",
        },
    )
    messages = _run(executor, tmp_path / "private", tmp_path / "project" / "main.yml", "cfg")
    assert messages == {"filtered": "HI!"}


def test_a_library_module_and_its_module_utils(executor: Executor, tmp_path: Path) -> None:
    """A module of the playbook's library/ is `ansible.legacy.NAME` (2.19 on) or
    `ansible.modules.NAME` inside its payload, and its module_utils/ file
    `ansible.module_utils.NAME`: a module job's `ansible` package is the server's, which has
    neither."""
    _write(
        tmp_path / "project",
        {
            "module_utils/greeting.py": "GREETING = 'from module_utils'\n",
            "library/greet.py": "from ansible.module_utils.basic import AnsibleModule\n"
            "from ansible.module_utils.greeting import GREETING\n\n"
            "module = AnsibleModule(argument_spec={'who': {'type': 'str'}})\n"
            "module.exit_json(changed=False, msg=GREETING + ' to ' + module.params['who'])\n",
            "main.yml": "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
            "    - name: greeted\n      greet:\n        who: you\n",
        },
    )
    messages = _run(executor, tmp_path / "private", tmp_path / "project" / "main.yml", "lib")
    assert messages == {"greeted": "from module_utils to you"}


def test_the_canary_passes_with_jinjas_native_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user of 2.15-2.18 may turn native types on (2.19 has them always): the warm executor's
    canary must give its result all the same."""
    monkeypatch.setenv("ANSIBLE_JINJA2_NATIVE", "True")
    _write(tmp_path / "project", {"main.yml": "- hosts: localhost\n  gather_facts: false\n"})
    executor = Executor(roles_paths=[], tmp_dir=tmp_path / "tmp", warm=True)
    try:
        _run(executor, tmp_path / "private", tmp_path / "project" / "main.yml", "native")
        _warm_as_asked(executor, "warm")
    finally:
        executor.close()
