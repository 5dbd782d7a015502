"""Live reload: which files a watch runs, and when an edit re-runs its CRs (no cluster)."""

from __future__ import annotations

import os
from pathlib import Path

from fake_api import FakeClock

from runner.control.reload import RoleReloader
from runner.watches import GVK, Watch
from runner.watches.sources import source_files

GVK_ECHO = GVK("x.example.com", "v1", "Echo")


def project(tmp_path: Path) -> Path:
    for path, text in {
        "roles/echo/tasks/main.yml": "- ansible.builtin.include_role:\n    name: common\n",
        "roles/echo/defaults/main.yml": "size: 1\n",
        "roles/common/tasks/main.yml": "- ansible.builtin.debug: {msg: hi}\n",
        "roles/echoflask/tasks/main.yml": "- ansible.builtin.debug: {msg: other}\n",
        "playbooks/echo.yml": "- hosts: localhost\n  roles: [echo]\n",
        "playbooks/unrelated.yml": "- hosts: localhost\n",
    }.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return tmp_path


def names(files: set[Path], root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in files}


def test_a_roles_files_and_what_it_includes(tmp_path: Path) -> None:
    root = project(tmp_path)
    watch = Watch(gvk=GVK_ECHO, role=str(root / "roles" / "echo"))
    assert names(source_files(watch, root), root) == {
        "roles/echo/tasks/main.yml",
        "roles/echo/defaults/main.yml",
        "roles/common/tasks/main.yml",  # included by name; echoflask is not
    }


def test_a_playbooks_roles(tmp_path: Path) -> None:
    root = project(tmp_path)
    watch = Watch(gvk=GVK_ECHO, playbook=root / "playbooks" / "echo.yml")
    files = names(source_files(watch, root), root)
    assert "playbooks/echo.yml" in files and "roles/common/tasks/main.yml" in files
    assert "playbooks/unrelated.yml" not in files


class FakeController:
    def __init__(self, watch: Watch) -> None:
        self.watch = watch
        self.reruns = 0

    def enqueue_all(self) -> int:
        self.reruns += 1
        return 2


def touch(path: Path, ns: int) -> None:
    path.write_text(path.read_text() + "# edit\n")
    os.utime(path, ns=(ns, ns))


def test_a_burst_of_saves_is_one_rerun_after_the_files_settle(tmp_path: Path) -> None:
    root = project(tmp_path)
    clock = FakeClock(0.0)
    controller = FakeController(Watch(gvk=GVK_ECHO, role=str(root / "roles" / "echo")))
    reloader = RoleReloader(
        [controller],
        lambda w: source_files(w, root),
        settle=0.25,
        min_gap=1.0,
        clock=clock,
    )
    assert reloader.poll() == [] and controller.reruns == 0  # nothing changed
    for i, t in enumerate((0.5, 0.6, 0.7)):  # three saves in a row, of two files
        clock.now = t
        touch(root / "roles" / ("echo" if i % 2 else "common") / "tasks" / "main.yml", 10**9 * i)
        assert reloader.poll() == []
    assert reloader.pending
    clock.now = 1.0
    assert reloader.poll() == [controller] and controller.reruns == 1
    assert reloader.poll() == [] and not reloader.pending  # once


def test_reruns_are_rate_limited(tmp_path: Path) -> None:
    root = project(tmp_path)
    clock = FakeClock(0.0)
    controller = FakeController(Watch(gvk=GVK_ECHO, role=str(root / "roles" / "echo")))
    reloader = RoleReloader(
        [controller], lambda w: source_files(w, root), settle=0.1, min_gap=5.0, clock=clock
    )
    touch(root / "roles" / "echo" / "defaults" / "main.yml", 1)
    clock.now = 0.1
    reloader.poll()
    clock.now = 0.3
    assert reloader.poll() == [controller]
    touch(root / "roles" / "echo" / "defaults" / "main.yml", 2)
    clock.now = 0.4
    reloader.poll()
    clock.now = 1.0
    assert reloader.poll() == []  # settled, but the last re-run was < 5 s ago
    clock.now = 5.4
    assert reloader.poll() == [controller] and controller.reruns == 2


def test_an_unrelated_role_does_not_rerun(tmp_path: Path) -> None:
    root = project(tmp_path)
    clock = FakeClock(0.0)
    controller = FakeController(Watch(gvk=GVK_ECHO, role=str(root / "roles" / "echo")))
    reloader = RoleReloader([controller], lambda w: source_files(w, root), clock=clock)
    touch(root / "roles" / "echoflask" / "tasks" / "main.yml", 7)
    for t in (0.5, 1.0, 2.0):
        clock.now = t
        assert reloader.poll() == []
