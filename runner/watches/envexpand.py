"""Environment expansion of the watches file's text (Go os.Expand, as operator-sdk does)."""

from __future__ import annotations

import re
from collections.abc import Mapping

# ---------------------------------------------------------------------------
# Environment expansion (Go os.Expand, as operator-sdk's replaceEnvVariables)
# ---------------------------------------------------------------------------

_ENV_REFERENCE = re.compile(r"\$(?:\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*)|([*#$@!?\-0-9]))")


def expand_env(text: str, environ: Mapping[str, str]) -> str:
    """Replace ``${NAME}`` and ``$NAME`` by ``environ[NAME]``; keep unknown references."""

    def replace(match: re.Match[str]) -> str:
        name = next((group for group in match.groups() if group is not None), "")
        if name and name in environ:
            return environ[name]
        return match.group(0)

    return _ENV_REFERENCE.sub(replace, text)
