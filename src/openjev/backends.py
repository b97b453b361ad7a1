"""The backends openjev can serve with: adding one is an adapter package and a line in `BACKENDS`.

Each `BackendSpec` says how to build the backend's runtime from the settings (the adapter is
imported only when chosen, so a missing optional dependency stops only that backend) and which
bias removal it answers with by default. The names the settings accept (`OPENJEV_BACKEND`), the
command line's choices and the start-up's choice of adapter all come from `BACKENDS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from openjev.domain.debiasing import DebiasMode

if TYPE_CHECKING:
    from openjev.runtime import Runtime
    from openjev.settings import Settings

BackendName = Literal["embedded", "sglang", "fake"]
"""The built-in backends' names (`Runtime.kind`); a test keeps it equal to `BACKENDS`' keys."""


@dataclass(frozen=True)
class BackendSpec:
    """One backend: its name, how to build its runtime, its default bias removal, a line of help."""

    name: str
    build_runtime: Callable[[Settings], Runtime]
    default_debias: DebiasMode
    help: str


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


# Default bias removal: embedded, what measured best on the small CPU model (docs/quality.md).
# SGLang: off until measured on the production model, since dividing out a prior hurt a stronger
# model in our measurements and option rotation multiplies GPU work. Fake: off, so tests see N + 1 calls.
BACKENDS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec("embedded", _embedded, "rotate+calibrate", "a GGUF model on llama.cpp, in process (CPU)"),
        BackendSpec("sglang", _sglang, "none", "SGLang, launched or connected to (GPU)"),
        BackendSpec("fake", _fake, "none", "deterministic, meaningless answers (tests and demos)"),
    )
}
