"""What the fork server preloads and patches while it does: templated config defaults
(runner/ansible/warm/patches/configdefaults.py), routing metadata (routingmeta.py)."""

from __future__ import annotations

import textwrap

import fresh_python


def test_compiled_default_templates_give_ansibles_own_values() -> None:
    probe = textwrap.dedent("""
        import ansible.constants as C
        from ansible.config.manager import ConfigManager
        from runner.ansible.warm.patches import configdefaults

        names = list(C.config.get_configuration_definitions())
        before = {n: C.config.get_config_value(n, variables=vars(C)) for n in names}
        configdefaults.install()
        configdefaults.check()
        import jinja2
        compiles = []
        plain_compile = jinja2.Environment.compile
        def counted(self, *args, **kwargs):
            compiles.append(args[0])
            return plain_compile(self, *args, **kwargs)
        jinja2.Environment.compile = counted
        for _ in range(2):  # compiled once, rendered on every read
            after = {n: C.config.get_config_value(n, variables=vars(C)) for n in names}
            changed = {n for n in names if after[n] != before[n] and n != "DEFAULT_LOCAL_TMP"}
            assert not changed, changed
        assert not compiles, compiles
        templated = [n for n, d in C.config.get_configuration_definitions().items()
                     if str(d.get("default", "")).startswith("{{")]
        assert templated, "no templated defaults to check"
        print("ok", len(templated))
        """)
    assert fresh_python.run(probe).startswith("ok ")


def test_compacted_routing_metadata_is_ansibles_own_and_only_while_warming() -> None:
    probe = """
        from pathlib import Path

        import ansible
        from ansible.plugins import loader
        from ansible.utils.collection_loader import _collection_finder as finder
        from runner.ansible.warm.patches import routingmeta

        original = finder._meta_yml_to_dict
        routing = Path(ansible.__file__).parent / "config" / "ansible_builtin_runtime.yml"
        expected = original(routing.read_bytes(), ("ansible.builtin", "runtime.yml"))
        loader.init_plugin_loader([])
        with routingmeta.compacted():
            assert finder._meta_yml_to_dict is not original
            loader.inventory_loader.get("host_list", class_only=True)
        assert finder._meta_yml_to_dict is original, "not restored"
        import ansible_collections.ansible.builtin as builtin
        meta = builtin._collection_meta
        assert meta == expected, "the compact copy differs from Ansible's parse"
        print("ok", len(meta["plugin_routing"]["modules"]))
        """
    out = fresh_python.run(probe)
    assert out.startswith("ok ") and int(out.split()[1]) > 1000, out
