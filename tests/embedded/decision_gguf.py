"""Decision GGUFs for tests: the packaged SmolLM2-135M with one decision type's metadata added.

A decision model's GGUF says what it is in its metadata (`<arch>.decision.type`, the `systemone`
chat template, `<arch>.decision.temperature.*`); the weights stay SmolLM2's, so llama.cpp's own
/v1/systemone (`xllamacpp.Server.handle_systemone`) and openjev answer on the very same file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from openjev.adapters.embedded.decision_prompt import SYSTEMONE_TEMPLATE
from openjev.adapters.embedded.gguf_file import RecordValue, with_records
from openjev.adapters.embedded.model import smollm2_path


def decision_gguf(
    target: Path, kind: str, template: str, temperatures: Mapping[str, float] | None = None, **extra: RecordValue
) -> Path:
    """A decision GGUF of type `kind` with `template` as its `systemone` template."""
    arch = "llama"
    values: dict[str, RecordValue] = {f"{arch}.decision.type": kind, SYSTEMONE_TEMPLATE: template}
    for name, temperature in (temperatures or {}).items():
        values[f"{arch}.decision.temperature.{name}"] = temperature
    values.update({f"{arch}.decision.{k}": v for k, v in extra.items()})
    return with_records(smollm2_path(), target, values)
