"""runner/ansible/deferred.py: modules made at import, run when first used."""

from __future__ import annotations

import fresh_python


def test_a_module_named_runs_when_first_used_and_others_as_usual() -> None:
    out = fresh_python.run("""
        import sys
        import json
        from runner.ansible.warm.patches.deferred import deferring
        finders = list(sys.meta_path)
        with deferring(["tomllib", "json"]):
            import tomllib          # deferred: made, not run
            import tomllib          # imported again: still not run
            import colorsys         # not named: run as usual
            import json             # imported before: left as it is
        assert sys.meta_path == finders
        assert "tomllib._parser" not in sys.modules and "loads" not in vars(tomllib)
        assert tomllib.__spec__.name == "tomllib" and "hsv_to_rgb" in vars(colorsys)
        assert "dumps" in vars(json)
        assert tomllib.loads("a = 1") == {"a": 1}  # the first use runs it
        assert "tomllib._parser" in sys.modules and "__getattr__" not in vars(tomllib)
        from tomllib import TOMLDecodeError
        assert issubclass(TOMLDecodeError, ValueError)
        try:
            tomllib.no_such_name
        except AttributeError as err:
            assert "no_such_name" in str(err)
        else:
            raise AssertionError("no_such_name")
        print("ok")
        """)
    assert out == "ok"


def test_the_playbook_kinds_preloading_defers_curses() -> None:
    out = fresh_python.run("""
        import importlib.util, sys
        from runner.ansible.warm.patches import apply
        from runner.ansible.warm.server import preload
        apply.start(["playbook"])
        preload.preload_for("playbook")
        from ansible.utils import display
        if importlib.util.find_spec("_curses") is not None:
            assert "_curses" not in sys.modules, "curses ran while preloading"
            assert display.HAS_CURSES, "Display still sees curses"
            assert callable(display.curses.setupterm) and "_curses" in sys.modules
        print("ok")
        """)
    assert out == "ok"
