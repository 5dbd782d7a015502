"""The warm executors' pure parts: which Ansible settings a job recomputes, where collections
are, and zipimport's compiled-code cache."""

from __future__ import annotations

import importlib
import sys
import zipfile
import zipimport
from pathlib import Path

import pytest

from runner.ansible.warm.patches import codecache, configrefresh

DEFINITIONS: dict[str, dict[str, object]] = {
    "DEFAULT_FORKS": {"type": "integer", "env": [{"name": "ANSIBLE_FORKS"}]},
    "DEFAULT_ROLES_PATH": {"type": "pathspec", "env": [{"name": "ANSIBLE_ROLES_PATH"}]},
    "DEFAULT_LOCAL_TMP": {"type": "tmppath", "env": [{"name": "ANSIBLE_LOCAL_TEMP"}]},
    "CACHE_PLUGIN_CONNECTION": {
        "type": "path",
        "env": [{"name": "ANSIBLE_CACHE_PLUGIN_CONNECTION"}],
    },
    "DISPLAY_SKIPPED_HOSTS": {
        "type": "boolean",
        "env": [{"name": "ANSIBLE_DISPLAY_SKIPPED_HOSTS"}],
    },
    "NO_ENV": {"type": "string"},
}


def test_same_environment_refreshes_only_paths() -> None:
    env = {"ANSIBLE_FORKS": "5", "HOME": "/root"}
    names = configrefresh.settings_to_refresh(DEFINITIONS, env, dict(env))
    assert sorted(names) == ["CACHE_PLUGIN_CONNECTION", "DEFAULT_LOCAL_TMP", "DEFAULT_ROLES_PATH"]


@pytest.mark.parametrize(
    ("server", "job"),
    [
        ({"ANSIBLE_FORKS": "5"}, {"ANSIBLE_FORKS": "6"}),  # changed
        ({}, {"ANSIBLE_FORKS": "6"}),  # added
        ({"ANSIBLE_FORKS": "5"}, {}),  # removed
    ],
)
def test_a_changed_variable_refreshes_its_setting(
    server: dict[str, str], job: dict[str, str]
) -> None:
    names = configrefresh.settings_to_refresh(DEFINITIONS, server, job)
    assert "DEFAULT_FORKS" in names
    assert "DISPLAY_SKIPPED_HOSTS" not in names and "NO_ENV" not in names


def test_variables_outside_ansible_do_not_count() -> None:
    names = configrefresh.settings_to_refresh(DEFINITIONS, {"PATH": "/a"}, {"PATH": "/b"})
    assert "DEFAULT_FORKS" not in names


def test_definitions_without_env_lists_are_fine() -> None:
    definitions: dict[str, dict[str, object]] = {
        "X": {"type": "boolean", "env": None},
        "Y": {"type": "boolean"},
    }
    assert configrefresh.settings_to_refresh(definitions, {}, {"ANSIBLE_X": "1"}) == []


def _collection(root: Path, namespace: str, name: str) -> Path:
    utils = root / "ansible_collections" / namespace / name / "plugins" / "module_utils"
    utils.mkdir(parents=True)
    (root / "ansible_collections" / namespace / name / "plugins" / "modules").mkdir()
    return utils


def test_collection_roots_in_order_without_duplicates(tmp_path: Path) -> None:
    first, second, empty = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _collection(first, "ns", "one")
    _collection(second, "ns", "two")
    empty.mkdir()
    env = {"ANSIBLE_COLLECTIONS_PATH": f"{first}:{second / 'ansible_collections'}:{empty}"}
    roots = codecache.collection_roots(env, [str(second), str(first), ""])
    assert roots == [first, second]
    old = {"ANSIBLE_COLLECTIONS_PATHS": str(second)}
    assert codecache.collection_roots(old, []) == [second]


@pytest.fixture
def code_cache(monkeypatch: pytest.MonkeyPatch) -> dict[bytes, object]:
    cache: dict[bytes, object] = {}
    monkeypatch.setattr(codecache, "_CODE_CACHE", cache)
    monkeypatch.setattr(zipimport, "_compile_source", zipimport._compile_source)  # type: ignore[attr-defined]
    return cache


def test_precompiled_code_is_used_for_identical_bytes_only(
    tmp_path: Path, code_cache: dict[bytes, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    utils = _collection(tmp_path / "disk", "cachetest", "col")
    same = b"VALUE = 'compiled from disk'\r\ndef where():\n    raise RuntimeError('here')\n"
    (utils / "same.py").write_bytes(same)
    (utils / "edited.py").write_bytes(b"VALUE = 'disk'\n")
    (utils / "broken.py").write_bytes(b"def (:\n")
    assert codecache.precompile_collections([tmp_path / "disk"]) == 0  # only those named
    assert codecache.precompile_collections([tmp_path / "disk"], ["cachetest.col"]) == 2
    # Prove which code runs: the cache entry for same.py's bytes answers with a marker.
    key = codecache.source_key(same)
    code_cache[key] = compile("VALUE = 'from the cache'", str(utils / "same.py"), "exec")
    codecache.install_code_cache()

    payload = tmp_path / "payload.zip"
    with zipfile.ZipFile(payload, "w") as zf:
        zf.writestr("cachemod_same.py", same)
        zf.writestr("cachemod_edited.py", b"VALUE = 'edited in the payload'\n")
    monkeypatch.syspath_prepend(str(payload))
    for name in ("cachemod_same", "cachemod_edited"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    same_module = importlib.import_module("cachemod_same")
    edited_module = importlib.import_module("cachemod_edited")
    assert same_module.VALUE == "from the cache"
    assert edited_module.VALUE == "edited in the payload"
    assert same_module.__file__ is not None and same_module.__file__.startswith(str(payload))


def test_cached_code_reports_the_payload_file(
    tmp_path: Path, code_cache: dict[bytes, object]
) -> None:
    utils = _collection(tmp_path, "cachetest", "col")
    source = b"def where():\n    def inner():\n        return 1\n    return inner\n"
    (utils / "m.py").write_bytes(source)
    codecache.precompile_collections([tmp_path], ["cachetest.col"])
    codecache.install_code_cache()
    code = zipimport._compile_source("/payload.zip/m.py", source)  # type: ignore[attr-defined]
    namespace: dict[str, object] = {}
    exec(code, namespace)
    where = namespace["where"]
    assert where.__code__.co_filename == "/payload.zip/m.py"  # type: ignore[attr-defined]
    assert where().__code__.co_filename == "/payload.zip/m.py"  # type: ignore[operator]


def test_a_wrapper_compiles_to_the_same_code_without_its_payload_literal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import base64

    payload = base64.b64encode(bytes(range(256)) * 600).decode()
    source = codecache.sample_wrapper(payload)  # this ansible-core line's wrapper
    compiled: list[int] = []

    def recording(text: str, *args: object, **kwargs: object) -> object:
        compiled.append(len(text))
        return compile(text, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(codecache, "compile", recording, raising=False)
    code = codecache.compile_wrapper(source, "<stdin>")
    assert compiled and max(compiled) < len(source) - len(payload) + 100, compiled
    plain = compile(source, "<stdin>", "exec", dont_inherit=True)
    assert codecache.constants(code) == codecache.constants(plain)
    assert payload in codecache.constants(code)


@pytest.mark.parametrize(
    "source",
    [
        "x = 1\n",
        "f = print\nf(\nzip_data='a\\\\nb',\n)\n",  # an escape: its text is not its value
        "f = print\nf(\nzip_data='abc',\n)\nextra = 1\n",  # not the last statement
        "f = print\nf(\nzip_data='operator-runner:zip_data',\n)\n",
    ],
)
def test_other_sources_compile_as_they_are(source: str) -> None:
    assert codecache.constants(codecache.compile_wrapper(source, "<stdin>")) == codecache.constants(
        compile(source, "<stdin>", "exec", dont_inherit=True)
    )


@pytest.mark.parametrize(
    "template",
    [
        "def main():\n    ZIPDATA = 'PAYLOAD'\n    return ZIPDATA\n\nRESULT = main()\n",
        'def main():\n    ZIPDATA = """PAYLOAD"""\n    return ZIPDATA\n\nRESULT = main()\n',
        "def main(**kw):\n    return kw\n\nRESULT = main(\nx='y',\nzip_data='PAYLOAD',\n)\n",
    ],
    ids=["2.16-2.18", "2.15", "2.19-"],
)
def test_every_lines_payload_literal_is_put_into_the_constants(template: str) -> None:
    import base64

    payload = base64.b64encode(bytes(range(256)) * 20).decode()
    source = template.replace("PAYLOAD", payload)
    code = codecache._compile_without_literal(source, "<stdin>")
    assert code is not None
    plain = compile(source, "<stdin>", "exec", dont_inherit=True)
    assert codecache.constants(code) == codecache.constants(plain)
    namespace: dict[str, object] = {}
    exec(code, namespace)
    assert payload in str(namespace["RESULT"])


LOOP = """
import signal, sys, threading, time
from runner.ansible.warm.server import forkserver, process
signal.signal(signal.SIGTERM, process.exit_on_term)
wakeup = process.wake_on_signals()
if sys.argv[2] == "without":  # the loop as it was: nothing wakes select() for a signal
    signal.set_wakeup_fd(-1)
    wakeup = process._WAKEUP[0]  # never written: select() waits on it in vain
listener = forkserver._listen(sys.argv[1])
# The race, made certain: the C-level handler runs while select() goes on waiting. On a busy
# machine a SIGTERM delivered to a server preempted just before select() blocks does exactly
# that; here the main thread blocks SIGTERM and a thread made before takes it.
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
print("ready", flush=True)
forkserver.serve_forever({listener: "module"}, None, wakeup)
"""


@pytest.mark.parametrize("pipe", ["with", "without"])
def test_a_sigterm_whose_handler_select_does_not_see_still_stops_the_server(
    tmp_path: Path, pipe: str
) -> None:
    """The cause of a server that did not stop within 60 s of SIGTERM (issue 35): a signal
    whose Python handler is pending while select() sleeps on. The signal pipe wakes it."""
    import subprocess
    import time

    proc = subprocess.Popen(
        [sys.executable, "-c", LOOP, str(tmp_path / "m.sock"), pipe],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        wchan = Path(f"/proc/{proc.pid}/task/{proc.pid}/wchan")
        deadline = time.monotonic() + 30
        while "poll" not in wchan.read_text() and "select" not in wchan.read_text():
            assert time.monotonic() < deadline, "the loop never waited in select()"
            time.sleep(0.01)  # the main thread in select(), where the race leaves it
        proc.terminate()
        try:
            code = proc.wait(timeout=10 if pipe == "with" else 2)
        except subprocess.TimeoutExpired:
            code = None
        assert code == (0 if pipe == "with" else None)  # without the pipe: still asleep
    finally:
        proc.kill()
        proc.wait()
