"""The GGUF container, read and written by hand on the `gguf` package's constants.

`gguf.GGUFReader` materialises every vocabulary entry as numpy views: about two seconds on a
49k-token vocabulary and twelve on Qwen's 152k tokens and 151k merges. Reading the same header
here takes a few tens of milliseconds, can skip the arrays entirely when only the model's name is
needed, and keeps each key/value record's raw bytes, so a rewritten file copies them unchanged.
"""

from __future__ import annotations

import math
import mmap
import struct
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

import gguf

from openjev.domain.errors import StartupError

_SCALAR_FORMATS: dict[gguf.GGUFValueType, str] = {
    gguf.GGUFValueType.UINT8: "<B",
    gguf.GGUFValueType.INT8: "<b",
    gguf.GGUFValueType.UINT16: "<H",
    gguf.GGUFValueType.INT16: "<h",
    gguf.GGUFValueType.UINT32: "<I",
    gguf.GGUFValueType.INT32: "<i",
    gguf.GGUFValueType.FLOAT32: "<f",
    gguf.GGUFValueType.BOOL: "<?",
    gguf.GGUFValueType.UINT64: "<Q",
    gguf.GGUFValueType.INT64: "<q",
    gguf.GGUFValueType.FLOAT64: "<d",
}
_HEADER = struct.Struct("<IIQQ")  # magic, version, tensor count, key/value count


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # GGUF order: the innermost (contiguous) dimension first
    kind: gguf.GGMLQuantizationType
    offset: int  # from the start of the data section

    @property
    def nbytes(self) -> int:
        block, size = gguf.GGML_QUANT_SIZES[self.kind]
        return math.prod(self.shape) // block * size


@dataclass(frozen=True)
class Layout:
    """Where everything in a GGUF lies: its key/value records as raw bytes, its tensors, its data."""

    version: int
    records: dict[str, bytes]  # key -> the whole record (key, type, value), as stored
    tensors: tuple[TensorInfo, ...]
    alignment: int
    data_start: int


def read_gguf_metadata(path: str | Path, *, arrays: bool = True) -> dict[str, Any]:
    """Every key/value pair of a GGUF header (little-endian GGUF v2 or v3).

    With `arrays=False`, array values are skipped and replaced by their length, so reading the
    name of a model never decodes its vocabulary.
    """
    with _mapped(path) as data:
        return {key: value for key, value, _start, _end in _records(data, arrays=arrays)}


def read_layout(path: str | Path) -> Layout:
    """The key/value records, tensor table and data offset of a GGUF, vocabulary left undecoded."""
    with _mapped(path) as data:
        version, tensor_count = _header(data)[:2]
        records: dict[str, bytes] = {}
        alignment = gguf.GGUF_DEFAULT_ALIGNMENT
        offset = _HEADER.size
        for key, value, start, offset in _records(data, arrays=False):
            records[key] = data[start:offset]
            if key == gguf.Keys.General.ALIGNMENT:
                alignment = int(value)
                if alignment <= 0 or alignment % 8:
                    raise ValueError(f"general.alignment is {alignment}, not a positive multiple of 8")
        tensors = []
        for _ in range(tensor_count):
            name, offset = _read_string(data, offset)
            dims = struct.unpack_from("<I", data, offset)[0]
            shape = struct.unpack_from(f"<{dims}Q", data, offset + 4)
            offset += 4 + 8 * dims
            kind, at = struct.unpack_from("<IQ", data, offset)
            tensors.append(TensorInfo(name, tuple(shape), gguf.GGMLQuantizationType(kind), at))
            offset += 12
        return Layout(version, records, tuple(tensors), alignment, _aligned(offset, alignment))


def write_header(handle: BinaryIO, layout: Layout, tensors: Sequence[TensorInfo]) -> tuple[TensorInfo, ...]:
    """Write `layout`'s records and a tensor table for `tensors` (offsets assigned here, aligned as
    `layout` is); return the tensors as placed. The data section starts at `handle`'s position then."""
    placed: list[TensorInfo] = []
    at = 0
    for tensor in tensors:
        placed.append(replace(tensor, offset=at))
        at = _aligned(at + tensor.nbytes, layout.alignment)
    handle.write(_HEADER.pack(gguf.GGUF_MAGIC, layout.version, len(placed), len(layout.records)))
    for record in layout.records.values():
        handle.write(record)
    for tensor in placed:
        name = tensor.name.encode()
        handle.write(struct.pack("<Q", len(name)) + name)
        handle.write(struct.pack(f"<I{len(tensor.shape)}Q", len(tensor.shape), *tensor.shape))
        handle.write(struct.pack("<IQ", tensor.kind, tensor.offset))
    handle.write(bytes(_aligned(handle.tell(), layout.alignment) - handle.tell()))
    return tuple(placed)


RecordValue = str | float | int


def encode_record(key: str, value: RecordValue) -> bytes:
    """One key/value record as GGUF stores it: a string, a float32, or an int as a uint32."""
    name = key.encode()
    head = struct.pack("<Q", len(name)) + name
    if isinstance(value, str):
        data = value.encode()
        return head + struct.pack("<IQ", gguf.GGUFValueType.STRING, len(data)) + data
    if isinstance(value, float):
        return head + struct.pack("<If", gguf.GGUFValueType.FLOAT32, value)
    return head + struct.pack("<II", gguf.GGUFValueType.UINT32, value)


def with_records(source: Path, target: Path, extra: Mapping[str, RecordValue]) -> Path:
    """Write `target`: `source` with the `extra` key/values added or replaced, every tensor copied as it is.

    How a model is told what it is without converting it again: a decision type and its template on a
    chat model's weights, so llama.cpp's own server answers on the very weights openjev serves.
    """
    layout = read_layout(source)
    records = {**layout.records, **{key: encode_record(key, value) for key, value in extra.items()}}
    layout = replace(layout, records=records)
    with target.open("wb") as out, source.open("rb") as src:
        placed = write_header(out, layout, layout.tensors)
        start = out.tell()
        for old, new in zip(layout.tensors, placed, strict=True):
            src.seek(layout.data_start + old.offset)
            out.seek(start + new.offset)
            out.write(src.read(old.nbytes))
        out.truncate(start + max((t.offset + t.nbytes for t in placed), default=0))
    return target


def _aligned(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


@contextmanager
def _mapped(path: str | Path) -> Iterator[mmap.mmap]:
    """The file memory-mapped for reading; any error in reading it becomes a StartupError naming it."""
    try:
        with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield data
    except (OSError, ValueError, struct.error, UnicodeDecodeError) as exc:
        raise StartupError(f"cannot read the GGUF header of {path}: {exc}") from None


def _header(data: mmap.mmap) -> tuple[int, int, int]:
    if len(data) < _HEADER.size or struct.unpack_from("<I", data, 0)[0] != gguf.GGUF_MAGIC:
        raise ValueError("not a GGUF file (bad magic number)")
    _magic, version, tensor_count, kv_count = _HEADER.unpack_from(data, 0)
    if version not in (2, 3):
        raise ValueError(f"unsupported GGUF version {version} (big-endian or too old)")
    return version, tensor_count, kv_count


def _records(data: mmap.mmap, *, arrays: bool) -> Iterator[tuple[str, Any, int, int]]:
    """Each key/value record: key, value (arrays as lengths unless `arrays`), start and end offsets."""
    kv_count = _header(data)[2]
    offset = _HEADER.size
    for _ in range(kv_count):
        start = offset
        key, offset = _read_string(data, offset)
        value_type = gguf.GGUFValueType(struct.unpack_from("<I", data, offset)[0])
        value, offset = _read_value(data, offset + 4, value_type, arrays=arrays)
        yield key, value, start, offset


def _read_string(data: mmap.mmap, offset: int) -> tuple[str, int]:
    length = struct.unpack_from("<Q", data, offset)[0]
    start = offset + 8
    return data[start : start + length].decode("utf-8"), start + length


def _read_value(data: mmap.mmap, offset: int, value_type: gguf.GGUFValueType, *, arrays: bool) -> tuple[Any, int]:
    if value_type == gguf.GGUFValueType.STRING:
        return _read_string(data, offset)
    if value_type != gguf.GGUFValueType.ARRAY:
        fmt = _SCALAR_FORMATS[value_type]
        return struct.unpack_from(fmt, data, offset)[0], offset + struct.calcsize(fmt)
    item_type = gguf.GGUFValueType(struct.unpack_from("<I", data, offset)[0])
    count = struct.unpack_from("<Q", data, offset + 4)[0]
    offset += 12
    if item_type in _SCALAR_FORMATS:
        fmt = _SCALAR_FORMATS[item_type]
        size = struct.calcsize(fmt)
        end = offset + size * count
        if not arrays:
            return count, end
        return [item for (item,) in struct.iter_unpack(fmt, data[offset:end])], end
    if item_type == gguf.GGUFValueType.STRING and not arrays:
        for _ in range(count):
            offset += 8 + struct.unpack_from("<Q", data, offset)[0]
        return count, offset
    items: list[Any] = []
    for _ in range(count):
        item, offset = _read_value(data, offset, item_type, arrays=arrays)
        items.append(item)
    return (items if arrays else count), offset
