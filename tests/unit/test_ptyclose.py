"""pexpect's fence (runner/ansible/ptyclose.py): installed only on the verified releases, with
one info line naming the version otherwise; the child it spawns is closed without the sleep."""

from __future__ import annotations

import logging

import pexpect
import pytest

from runner.ansible import ptyclose


@pytest.fixture
def plain_pexpect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pexpect, "spawn", ptyclose.PromptCloseSpawn.__mro__[1])


def test_installed_on_the_releases_it_is_verified_on(plain_pexpect: None) -> None:
    assert ptyclose.not_verified() is None  # this virtualenv's pexpect, ptyprocess, ansible-runner
    assert ptyclose.install() is None
    assert pexpect.spawn is ptyclose.PromptCloseSpawn


def test_another_release_leaves_pexpect_alone_and_names_the_version(
    plain_pexpect: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    plain = pexpect.spawn
    versions = {"pexpect": "5.0.1", "ptyprocess": "0.7.0", "ansible-runner": "2.4.3"}
    monkeypatch.setattr(ptyclose, "_release", versions.__getitem__)
    with caplog.at_level(logging.INFO, logger="runner.executor"):
        assert ptyclose.install() == "pexpect 5.0.1 (verified on 4.8, 4.9)"
    assert pexpect.spawn is plain
    assert [r.getMessage() for r in caplog.records] == [
        "runs close their pty as pexpect does (0.1 s each): not verified on pexpect 5.0.1 "
        "(verified on 4.8, 4.9)"
    ]


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")  # pytest's threads
def test_the_child_is_closed_as_soon_as_it_has_exited() -> None:
    child = ptyclose.PromptCloseSpawn("/bin/echo", ["hi"], encoding="utf-8")
    child.expect(pexpect.EOF, timeout=10)
    assert child.ptyproc.delayafterclose == 0.1  # what pexpect's own close sleeps
    child.close()
    assert child.exitstatus == 0 and child.closed
    assert child.ptyproc.delayafterclose == 0  # it waited for the exit instead
