"""Compiled templates shared across runs (runner/ansible/warm/patches/templatecache.py, and
templatecache_jinja.py on 2.15-2.18): real
ansible-playbook runs, with and without the cache, give the same output; a second run compiles
nothing; a filter that changed how it takes its context, or a template that does not compile,
is compiled again."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from runner.ansible.warm.jobenv import TEMPLATE_CACHE_ENV

# A playbook job as the fork server runs it (forkserver._run_playbook), plus a count of Jinja's
# Jinja code generations of Ansible's templates and expressions, the middle step of a compile (a
# line each, from whichever process compiled, worker or job; not ansible-core's config defaults,
# compiled by another environment, once per fork server; not 2.15's parse-only look at a
# conditional).
DRIVER = """
import os, sys
import jinja2.environment
from ansible.release import __version__
from runner.ansible.warm.patches import templatecache, templatecache_jinja

generate = jinja2.environment.Environment._generate

def counted(self, *args, **kwargs):
    if type(self).__name__ == "AnsibleEnvironment":
        with open(os.environ["COMPILES"], "a") as out:
            out.write("compiled\\n")
    return generate(self, *args, **kwargs)

jinja2.environment.Environment._generate = counted
if "MAX_ENTRIES" in os.environ:
    templatecache.MAX_ENTRIES = int(os.environ["MAX_ENTRIES"])
if tuple(int(x) for x in __version__.split(".")[:2]) >= (2, 19):
    templatecache.install()
else:
    templatecache_jinja.install()
from ansible.cli.playbook import main
main(["ansible-playbook", *sys.argv[1:]])
"""

PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  vars:
    numbers: [3, 1, 2]
    who: world
  tasks:
    - ansible.builtin.debug: {msg: "hello {{ who | upper }} {{ numbers | sort | join(',') }}"}
    - ansible.builtin.debug: {msg: "{{ who }}"}
    - ansible.builtin.debug: {msg: "only when {{ numbers | max }}"}
      when: numbers | length == 3 and who is string
    - ansible.builtin.debug: {msg: never}
      when: numbers | length == 4
    - ansible.builtin.assert: {that: ["numbers | max == 3", "who is string"], quiet: true}
    - ansible.builtin.debug: {msg: "{{ who | local_filter }}"}
"""

PLAIN_FILTER = """
class FilterModule:
    def filters(self):
        return {"local_filter": lambda value: "plain:" + value}
"""

CONTEXT_FILTER = """
from jinja2 import pass_context

@pass_context
def local_filter(context, value):
    return "context:" + value + ":" + context["who"]

class FilterModule:
    def filters(self):
        return {"local_filter": local_filter}
"""


def project(tmp_path: Path, playbook: str, filter_source: str) -> Path:
    (tmp_path / "filter_plugins").mkdir(exist_ok=True)
    (tmp_path / "filter_plugins" / "local.py").write_text(filter_source)
    (tmp_path / "main.yml").write_text(playbook)
    return tmp_path / "main.yml"


def run(
    playbook: Path, cache: Path | None, max_entries: int | None = None
) -> tuple[int, list[str], int]:
    """(exit code, the debug messages and failure lines, Jinja compiles) of one run."""
    compiles = playbook.parent / "compiles"
    compiles.unlink(missing_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ANSIBLE_") and k != TEMPLATE_CACHE_ENV
    }
    env |= {
        "COMPILES": str(compiles),
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
        "ANSIBLE_NOCOLOR": "True",
        "ANSIBLE_LOCAL_TEMP": str(playbook.parent / "tmp"),
    }
    if cache is not None:
        env[TEMPLATE_CACHE_ENV] = str(cache)
    if max_entries is not None:
        env["MAX_ENTRIES"] = str(max_entries)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, "-i", "localhost,", "-c", "local", str(playbook)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = [
        line.strip()
        for line in done.stdout.splitlines()
        if re.search(r'"msg":|fatal:|skipping:', line)
    ]
    count = len(compiles.read_text().splitlines()) if compiles.exists() else 0
    return done.returncode, lines, count


def test_cached_runs_give_plain_ansibles_output_and_compile_nothing_the_second_time(
    tmp_path: Path,
) -> None:
    playbook = project(tmp_path, PLAYBOOK, PLAIN_FILTER)
    cache = tmp_path / "cache"
    plain = run(playbook, None)
    first = run(playbook, cache)
    second = run(playbook, cache)
    assert plain[0] == first[0] == second[0] == 0
    assert '"msg": "hello WORLD 1,2,3"' in plain[1]
    assert '"msg": "plain:world"' in plain[1]
    assert plain[1] == first[1] == second[1]
    assert first[2] >= 8  # every template and condition compiled once (some more than once)
    assert len(list(cache.iterdir())) >= 8
    assert second[2] == 0  # all of them loaded from the cache


def test_a_filter_that_now_takes_its_context_is_compiled_again(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    before = run(project(tmp_path, PLAYBOOK, PLAIN_FILTER), cache)
    assert '"msg": "plain:world"' in before[1]
    # Jinja decides at compile time to pass the filter its context: a stale compile would call
    # the new filter without it and fail.
    after = run(project(tmp_path, PLAYBOOK, CONTEXT_FILTER), cache)
    assert after[0] == 0
    assert '"msg": "context:world:world"' in after[1]
    assert after[2] == 1  # that one template, and only it


def test_a_template_that_does_not_compile_fails_as_before_every_time(tmp_path: Path) -> None:
    good_cache = tmp_path / "good-cache"
    run(project(tmp_path, PLAYBOOK, PLAIN_FILTER), good_cache)
    broken = PLAYBOOK + '    - ansible.builtin.debug: {msg: "{{ who | }}"}\n'
    playbook = project(tmp_path, broken, PLAIN_FILTER)
    cache = tmp_path / "cache"
    plain = run(playbook, None)
    first = run(playbook, cache)
    second = run(playbook, cache)
    assert plain[0] == first[0] == second[0] == 2
    assert any(line.startswith("fatal:") for line in plain[1])
    assert plain[1] == first[1] == second[1]
    # the broken one was not stored (the others were): it fails to compile again every time
    assert len(list(cache.iterdir())) == len(list(good_cache.iterdir()))


def test_without_the_variable_nothing_is_cached(tmp_path: Path) -> None:
    playbook = project(tmp_path, PLAYBOOK, PLAIN_FILTER)
    first, second = run(playbook, None), run(playbook, None)
    assert first[2] == second[2] > 0


def test_the_cache_is_bounded(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    for index in range(3):
        (cache / f"old{index}").write_bytes(b"")
    code, lines, _ = run(project(tmp_path, PLAYBOOK, PLAIN_FILTER), cache, max_entries=3)
    assert code == 0, lines
    assert sorted(p.name for p in cache.iterdir()) == ["old0", "old1", "old2"]
