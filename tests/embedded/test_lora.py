"""A LoRA adapter in llama.cpp's GGUF layout merged while a model is rewritten as Q8_0: each adapted
matrix becomes W + (alpha / rank) · B·A to within Q8_0's step, nothing else changes, and an adapter
that is not one, or that was trained for another model, is refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

from openjev.adapters.embedded.lora import read_adapter
from openjev.adapters.embedded.requantize import requantize
from openjev.domain.errors import StartupError

RANK, ALPHA = 4, 8.0


def write_model(path: Path, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A GGUF with a Q4_1 matrix, an F16 matrix and a norm; returns their float32 values."""
    values = {
        "blk.0.ffn_up.weight": rng.normal(0, 0.1, (16, 64)).astype(np.float32),  # 16 outputs, 64 inputs
        "blk.0.attn_q.weight": rng.normal(0, 0.1, (8, 32)).astype(np.float32),
        "blk.0.ffn_norm.weight": rng.normal(1, 0.1, 64).astype(np.float32),
    }
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_string("general.name", "tiny")
    packed = quantize(values["blk.0.ffn_up.weight"], Q.Q4_1)
    writer.add_tensor("blk.0.ffn_up.weight", packed, raw_shape=packed.shape, raw_dtype=Q.Q4_1)
    writer.add_tensor("blk.0.attn_q.weight", values["blk.0.attn_q.weight"].astype(np.float16))
    writer.add_tensor("blk.0.ffn_norm.weight", values["blk.0.ffn_norm.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    values["blk.0.ffn_up.weight"] = dequantize(packed, Q.Q4_1).reshape(16, 64)
    values["blk.0.attn_q.weight"] = values["blk.0.attn_q.weight"].astype(np.float16).astype(np.float32)
    return values


def write_adapter(path: Path, factors: dict[str, tuple[np.ndarray, np.ndarray]], *, kind: str = "lora") -> None:
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, kind)
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, ALPHA)
    for name, (a, b) in factors.items():
        writer.add_tensor(f"{name}.lora_a", quantize(a, Q.Q8_0), raw_shape=quantize(a, Q.Q8_0).shape, raw_dtype=Q.Q8_0)
        writer.add_tensor(f"{name}.lora_b", b.astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("workers", [1, 2])  # in this process, and in two worker processes
def test_adapted_matrices_get_their_update_and_the_rest_is_rewritten_as_without_one(
    tmp_path: Path, workers: int
) -> None:
    rng = np.random.default_rng(3)
    values = write_model(tmp_path / "model.gguf", rng)
    a = rng.normal(0, 0.5, (RANK, 64)).astype(np.float32)
    b = rng.normal(0, 0.5, (16, RANK)).astype(np.float32)
    q_a = rng.normal(0, 0.5, (RANK, 32)).astype(np.float32)
    q_b = rng.normal(0, 0.5, (8, RANK)).astype(np.float32)
    write_adapter(tmp_path / "adapter.gguf", {"blk.0.ffn_up.weight": (a, b), "blk.0.attn_q.weight": (q_a, q_b)})

    requantize(
        tmp_path / "model.gguf", tmp_path / "merged.gguf", workers=workers, rows=5, adapter=tmp_path / "adapter.gguf"
    )
    requantize(tmp_path / "model.gguf", tmp_path / "plain.gguf", workers=workers, rows=5)

    merged = {t.name: t for t in gguf.GGUFReader(tmp_path / "merged.gguf").tensors}
    plain = {t.name: t for t in gguf.GGUFReader(tmp_path / "plain.gguf").tensors}
    stored_a = dequantize(quantize(a, Q.Q8_0), Q.Q8_0).reshape(a.shape)  # the factors as the adapter holds them
    stored_q_a = dequantize(quantize(q_a, Q.Q8_0), Q.Q8_0).reshape(q_a.shape)
    for name, (fa, fb) in {"blk.0.ffn_up.weight": (stored_a, b), "blk.0.attn_q.weight": (stored_q_a, q_b)}.items():
        expected = values[name] + (fb.astype(np.float16).astype(np.float64) @ fa) * (ALPHA / RANK)
        assert merged[name].tensor_type == Q.Q8_0  # the F16 matrix too: adapted matrices are always Q8_0
        got = dequantize(np.asarray(merged[name].data), Q.Q8_0).reshape(expected.shape)
        step = np.abs(expected).max() * (1 / 254 + 2**-11)  # half a level, and the float16 scale's rounding
        assert np.abs(got - expected).max() <= step
        assert np.abs(got - values[name]).max() > 10 * step  # the update is there
    assert plain["blk.0.attn_q.weight"].tensor_type == Q.F16  # without an adapter, F16 is kept
    assert np.array_equal(np.asarray(merged["blk.0.ffn_norm.weight"].data), values["blk.0.ffn_norm.weight"])


def test_the_update_is_read_a_block_of_rows_at_a_time(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    a = rng.normal(0, 0.5, (RANK, 64)).astype(np.float32)
    b = rng.normal(0, 0.5, (16, RANK)).astype(np.float32)
    write_adapter(tmp_path / "adapter.gguf", {"blk.0.ffn_up.weight": (a, b)})
    adapter = read_adapter(tmp_path / "adapter.gguf")
    whole = adapter.update("blk.0.ffn_up.weight", 0, 16)
    assert whole.shape == (16, 64) and whole.dtype == np.float32
    assert np.array_equal(
        np.concatenate([adapter.update("blk.0.ffn_up.weight", s, min(s + 5, 16)) for s in (0, 5, 10, 15)]), whole
    )
    assert adapter.alpha == ALPHA and adapter.matrices["blk.0.ffn_up.weight"].rank == RANK


def test_an_adapter_for_another_model_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    write_model(tmp_path / "model.gguf", rng)
    wide = (rng.normal(0, 1, (RANK, 96)).astype(np.float32), rng.normal(0, 1, (16, RANK)).astype(np.float32))
    write_adapter(tmp_path / "wide.gguf", {"blk.0.ffn_up.weight": wide})
    with pytest.raises(
        StartupError, match=r"changes blk.0.ffn_up.weight of shape \(96, 16\), which the model has of shape \(64, 16\)"
    ):
        requantize(tmp_path / "model.gguf", tmp_path / "out.gguf", adapter=tmp_path / "wide.gguf")
    absent = (rng.normal(0, 1, (RANK, 64)).astype(np.float32), rng.normal(0, 1, (16, RANK)).astype(np.float32))
    write_adapter(tmp_path / "absent.gguf", {"blk.9.ffn_up.weight": absent})
    with pytest.raises(StartupError, match="which the model has absent: it was trained for another model"):
        requantize(tmp_path / "model.gguf", tmp_path / "out.gguf", adapter=tmp_path / "absent.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_a_file_that_is_not_a_lora_adapter_is_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    write_model(tmp_path / "model.gguf", rng)
    with pytest.raises(StartupError, match="is not a LoRA adapter GGUF"):
        read_adapter(tmp_path / "model.gguf")
    factors = (rng.normal(0, 1, (RANK, 64)).astype(np.float32), rng.normal(0, 1, (16, RANK)).astype(np.float32))
    write_adapter(tmp_path / "other.gguf", {"blk.0.ffn_up.weight": factors}, kind="control_vector")
    with pytest.raises(StartupError, match="is not a LoRA adapter GGUF"):
        read_adapter(tmp_path / "other.gguf")
    mismatched = (factors[0], rng.normal(0, 1, (16, RANK + 1)).astype(np.float32))
    write_adapter(tmp_path / "ranks.gguf", {"blk.0.ffn_up.weight": mismatched})
    with pytest.raises(StartupError, match=r"the factors of blk\.0\.ffn_up\.weight are missing or their ranks differ"):
        read_adapter(tmp_path / "ranks.gguf")
