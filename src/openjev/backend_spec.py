"""What the settings know of each backend: its name, its default bias removal, a line of help.

A leaf: `openjev.settings`, `openjev.runtime` and the adapters' builders import it, and it imports
none of them. How each backend's runtime is built is the registry's (`openjev.backends.BACKENDS`),
which stands above the adapters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from openjev.domain.debiasing import DebiasMode

BackendName = Literal["embedded", "sglang", "fake"]
"""The built-in backends' names (`Runtime.kind`); a test keeps it equal to `BUILT_IN_BACKENDS`' keys."""


@dataclass(frozen=True)
class BackendSpec:
    """One backend as the settings see it: its name, its default bias removal, a line of help."""

    name: str
    default_debias: DebiasMode
    help: str


# Default bias removal: embedded, what measured best on the small CPU model (docs/quality.md).
# SGLang: off until measured on the production model, since dividing out a prior hurt a stronger
# model in our measurements and option rotation multiplies GPU work. Fake: off, so tests see N + 1 calls.
BUILT_IN_BACKENDS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec("embedded", "rotate+calibrate", "a GGUF model on llama.cpp, in process (CPU)"),
        BackendSpec("sglang", "none", "SGLang, launched or connected to (GPU)"),
        BackendSpec("fake", "none", "deterministic, meaningless answers (tests and demos)"),
    )
}
