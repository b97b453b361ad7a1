"""The GGUF container read by hand: the same values and tensor table as `gguf.GGUFReader`, and a
header written from a layout that `gguf.GGUFReader` reads back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf.quants import quantize

from openjev.adapters.embedded.gguf_file import (
    RecordValue,
    TensorInfo,
    read_gguf_metadata,
    read_layout,
    with_records,
    write_header,
)
from openjev.adapters.embedded.model import smollm2_path
from openjev.domain.errors import StartupError


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small GGUF with every value type, written by the gguf package itself."""
    path = tmp_path_factory.mktemp("gguf") / "Tiny-Model-7B-Chat.Q8_0.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("general.organization", "Some Org")
    writer.add_string("general.basename", "tiny-model")
    writer.add_uint8("t.u8", 200)
    writer.add_int8("t.i8", -1)
    writer.add_uint16("t.u16", 60000)
    writer.add_int16("t.i16", -300)
    writer.add_uint32("t.u32", 7)
    writer.add_int32("t.i32", -3)
    writer.add_float32("t.f32", 1.5)
    writer.add_bool("t.bool", True)
    writer.add_uint64("t.u64", 2**40)
    writer.add_int64("t.i64", -(2**40))
    writer.add_float64("t.f64", 0.25)
    writer.add_array("t.strings", ["x", "héllo", "", "日本", "🎉"])
    writer.add_array("t.ints", [1, -2, 3])
    writer.add_array("t.floats", [0.5, 1.5])
    writer.add_array("t.nested", [[1, 2], [3]])
    writer.add_tensor("weight", np.zeros((2, 2), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_reader_agrees_with_gguf_reader_on_every_value_type(tiny_gguf: Path) -> None:
    ours = read_gguf_metadata(tiny_gguf)
    reference: dict[str, Any] = {
        key: field.contents() for key, field in gguf.GGUFReader(tiny_gguf).fields.items() if not key.startswith("GGUF.")
    }
    assert ours.pop("t.nested") == [[1, 2], [3]]  # gguf-py flattens nested arrays; we keep their shape
    reference.pop("t.nested")
    assert ours == reference
    assert ours["t.strings"] == ["x", "héllo", "", "日本", "🎉"]


def test_skipping_arrays_keeps_their_lengths_and_every_scalar(tiny_gguf: Path) -> None:
    light = read_gguf_metadata(tiny_gguf, arrays=False)
    assert light["t.strings"] == 5 and light["t.ints"] == 3 and light["t.nested"] == 2
    assert light["t.u64"] == 2**40 and light["t.bool"] is True and light["general.architecture"] == "llama"


def test_a_file_that_is_not_gguf_is_a_startup_error(tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"PK\x03\x04" + bytes(64))
    with pytest.raises(StartupError, match="not a GGUF file"):
        read_gguf_metadata(bogus)


def test_smollm2_vocabulary_is_read_in_full() -> None:
    metadata = read_gguf_metadata(smollm2_path())
    assert len(metadata["tokenizer.ggml.tokens"]) == 49152
    assert len(metadata["tokenizer.ggml.merges"]) == 48900
    assert metadata["tokenizer.ggml.tokens"][1] == "<|im_start|>"
    assert metadata["tokenizer.ggml.pre"] == "smollm"


def test_the_layout_agrees_with_gguf_reader_on_every_tensor(tiny_gguf: Path) -> None:
    layout = read_layout(tiny_gguf)
    reference = gguf.GGUFReader(tiny_gguf)
    assert layout.data_start == reference.data_offset and layout.alignment == 32
    assert list(layout.records) == [k for k in reference.fields if not k.startswith("GGUF.")]
    expected = [
        (t.name, tuple(int(n) for n in t.shape), Q(t.tensor_type), int(t.data_offset) - reference.data_offset)
        for t in reference.tensors
    ]
    assert [(t.name, t.shape, t.kind, t.offset) for t in layout.tensors] == expected
    assert [t.nbytes for t in layout.tensors] == [int(t.n_bytes) for t in reference.tensors]


def test_a_written_header_keeps_the_records_it_is_given_and_places_new_tensors(tiny_gguf: Path, tmp_path: Path) -> None:
    layout = read_layout(tiny_gguf)
    kept = {key: record for key, record in layout.records.items() if not key.startswith("t.")}
    matrix = np.random.default_rng(0).normal(0, 0.1, (4, 64)).astype(np.float32)
    tensors = [TensorInfo("odd", (3,), Q.F32, 0), TensorInfo("matrix", (64, 4), Q.Q8_0, 0)]
    contents = [np.arange(3, dtype=np.float32).tobytes(), quantize(matrix, Q.Q8_0).tobytes()]
    out = tmp_path / "out.gguf"
    with out.open("wb") as handle:
        placed = write_header(handle, type(layout)(**{**vars(layout), "records": kept}), tensors)
        start = handle.tell()
        for tensor, content in zip(placed, contents, strict=True):
            handle.seek(start + tensor.offset)
            handle.write(content)
    assert [t.offset for t in placed] == [0, 32]  # 12 bytes, then the next 32-byte boundary
    written = gguf.GGUFReader(out)
    assert [k for k in written.fields if not k.startswith("GGUF.")] == list(kept)
    assert written.fields["general.basename"].contents() == "tiny-model"
    assert np.array_equal(written.tensors[0].data, np.arange(3, dtype=np.float32))
    assert np.array_equal(np.asarray(written.tensors[1].data).tobytes(), contents[1])


def test_an_alignment_that_is_not_a_multiple_of_8_is_a_startup_error(tmp_path: Path) -> None:
    path = tmp_path / "odd.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32(gguf.Keys.General.ALIGNMENT, 12)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    with pytest.raises(StartupError, match=r"general\.alignment is 12, not a positive multiple of 8"):
        read_layout(path)


def test_records_added_and_replaced_keep_every_other_value_and_the_tensors(tiny_gguf: Path, tmp_path: Path) -> None:
    extra: dict[str, RecordValue] = {"t.u32": 9, "t.new": "décision", "t.temperature": 1.25}
    written = with_records(tiny_gguf, tmp_path / "with.gguf", extra)
    before, after = read_gguf_metadata(tiny_gguf), read_gguf_metadata(written)
    assert after == {**before, "t.u32": 9, "t.new": "décision", "t.temperature": 1.25}
    reader = gguf.GGUFReader(written)
    assert [t.name for t in reader.tensors] == ["weight"]
    assert np.array_equal(reader.tensors[0].data, np.zeros((2, 2), dtype=np.float32))
