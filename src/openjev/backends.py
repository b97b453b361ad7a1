"""The backends openjev can serve with: adding one is an adapter package, a `BackendSpec` and a line here.

Each `Backend` is its `BackendSpec` (`openjev.backend_spec`: name, default bias removal, help) and
how to build its runtime from the settings; the adapter is imported only when chosen, so a missing
optional dependency stops only that backend. The command line's choices and the start-up's choice
of adapter come from `BACKENDS`. This registry stands above the adapters' builders, which import
the settings and `Runtime`; those import only the leaf `openjev.backend_spec`, never this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from openjev.backend_spec import BUILT_IN_BACKENDS, BackendName, BackendSpec
from openjev.runtime import Runtime
from openjev.settings import Settings


@dataclass(frozen=True)
class Backend(BackendSpec):
    """One backend the server can run: its spec, and how to build its runtime from the settings."""

    build_runtime: Callable[[Settings], Runtime]


def _embedded(settings: Settings) -> Runtime:
    from openjev.adapters.embedded_requirements import require_embedded_dependencies

    require_embedded_dependencies()  # a StartupError, not an ImportError, where the group is missing
    from openjev.adapters.embedded.build import build_runtime

    return build_runtime(settings)


def _sglang(settings: Settings) -> Runtime:
    from openjev.adapters.sglang.build import build_runtime

    return build_runtime(settings)


def _fake(settings: Settings) -> Runtime:
    from openjev.adapters.fake.build import build_runtime

    return build_runtime(settings)


def _built_in(name: BackendName, build_runtime: Callable[[Settings], Runtime]) -> Backend:
    spec = BUILT_IN_BACKENDS[name]
    return Backend(spec.name, spec.default_debias, spec.help, build_runtime)


BACKENDS: dict[str, Backend] = {
    backend.name: backend
    for backend in (_built_in("embedded", _embedded), _built_in("sglang", _sglang), _built_in("fake", _fake))
}
