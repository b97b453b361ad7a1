"""Decision GGUFs for tests: the packaged SmolLM2-135M with one decision type's metadata added.

A decision model's GGUF says what it is in its metadata (`<arch>.decision.type`, the `systemone`
chat template, `<arch>.decision.temperature.*`); the weights stay SmolLM2's, so llama.cpp's own
/v1/systemone (`xllamacpp.Server.handle_systemone`) and openjev answer on the very same file.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path

import gguf

from openjev.adapters.embedded.gguf_file import read_layout, write_header
from openjev.adapters.embedded.model import smollm2_path

SYSTEMONE_TEMPLATE_KEY = "tokenizer.chat_template.systemone"

Value = str | float | int


def _record(key: str, value: Value) -> bytes:
    """One GGUF key/value record: a string, a float32 or a uint32."""
    name = key.encode()
    head = struct.pack("<Q", len(name)) + name
    if isinstance(value, str):
        data = value.encode()
        return head + struct.pack("<I", gguf.GGUFValueType.STRING) + struct.pack("<Q", len(data)) + data
    if isinstance(value, float):
        return head + struct.pack("<If", gguf.GGUFValueType.FLOAT32, value)
    return head + struct.pack("<II", gguf.GGUFValueType.UINT32, value)


def with_metadata(target: Path, extra: Mapping[str, Value], source: Path | None = None) -> Path:
    """Write `target`: `source` (default: the packaged SmolLM2) with `extra` key/values added or replaced."""
    source = source or smollm2_path()
    layout = read_layout(source)
    records = dict(layout.records)
    for key, value in extra.items():
        records[key] = _record(key, value)
    layout = type(layout)(layout.version, records, layout.tensors, layout.alignment, layout.data_start)
    with target.open("wb") as out, source.open("rb") as src:
        placed = write_header(out, layout, layout.tensors)
        start = out.tell()
        for old, new in zip(layout.tensors, placed, strict=True):
            src.seek(layout.data_start + old.offset)
            out.seek(start + new.offset)
            out.write(src.read(old.nbytes))
        end = start + max(t.offset + t.nbytes for t in placed)
        out.truncate(end)
    return target


def decision_gguf(
    target: Path, kind: str, template: str, temperatures: Mapping[str, float] | None = None, **extra: Value
) -> Path:
    """A decision GGUF of type `kind` with `template` as its `systemone` template."""
    arch = "llama"
    values: dict[str, Value] = {f"{arch}.decision.type": kind, SYSTEMONE_TEMPLATE_KEY: template}
    for name, temperature in (temperatures or {}).items():
        values[f"{arch}.decision.temperature.{name}"] = temperature
    values.update({f"{arch}.decision.{k}": v for k, v in extra.items()})
    return with_metadata(target, values)
