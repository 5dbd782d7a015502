"""What the fork server preloads (runner/ansible/preload.py)."""

from __future__ import annotations

import textwrap

import fresh_python


def test_compiled_default_templates_give_ansibles_own_values() -> None:
    probe = textwrap.dedent("""
        import ansible.constants as C
        from ansible.config.manager import ConfigManager
        from runner.ansible.preload import cache_default_templates

        names = list(C.config.get_configuration_definitions())
        before = {n: C.config.get_config_value(n, variables=vars(C)) for n in names}
        cache_default_templates()
        for _ in range(2):  # compiled once, rendered on every read
            after = {n: C.config.get_config_value(n, variables=vars(C)) for n in names}
            changed = {n for n in names if after[n] != before[n] and n != "DEFAULT_LOCAL_TMP"}
            assert not changed, changed
        templated = [n for n, d in C.config.get_configuration_definitions().items()
                     if str(d.get("default", "")).startswith("{{")]
        assert templated, "no templated defaults to check"
        print("ok", len(templated))
        """)
    assert fresh_python.run(probe).startswith("ok ")
