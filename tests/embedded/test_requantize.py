"""Rewriting a GGUF's quantized matrices as Q8_0: ggml's own rounding, everything else copied as it was."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

from openjev.adapters.embedded.requantize import CHUNK, q8_0_blocks, requantize


def test_q8_0_blocks_match_ggml_reference_rounding_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    weights = rng.normal(0, 0.05, (8, 128)).astype(np.float32)
    weights[0, :32] = 0.0  # an all-zero block
    weights[1, :32] = np.linspace(-1.0, 1.0, 32)  # exact ties after scaling
    assert np.array_equal(q8_0_blocks(weights), quantize(weights, Q.Q8_0))


def test_q8_0_blocks_are_the_same_across_chunk_boundaries() -> None:
    weights = np.random.default_rng(2).normal(0, 0.05, (2 * CHUNK + 3, 32)).astype(np.float32)
    assert np.array_equal(q8_0_blocks(weights), quantize(weights, Q.Q8_0))


@pytest.mark.parametrize("workers", [1, 2])  # in this process, and in two worker processes
def test_requantize_converts_quantized_matrices_and_copies_the_rest(tmp_path: Path, workers: int) -> None:
    rng = np.random.default_rng(1)
    matrix = rng.normal(0, 0.1, (16, 64)).astype(np.float32)
    norm = rng.normal(1, 0.1, 64).astype(np.float32)
    source = tmp_path / "in.gguf"
    writer = gguf.GGUFWriter(source, "llama")
    writer.add_string("general.name", "tiny")
    writer.add_array("tokenizer.ggml.tokens", ["a", "b", "ç"])
    writer.add_uint32("llama.context_length", 128)
    packed = quantize(matrix, Q.Q4_1)
    writer.add_tensor("blk.0.ffn_up.weight", packed, raw_shape=packed.shape, raw_dtype=Q.Q4_1)
    writer.add_tensor("blk.0.ffn_norm.weight", norm)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    requantize(source, tmp_path / "out.gguf", workers=workers, rows=5)  # the 16 rows in 4 parts

    out = gguf.GGUFReader(tmp_path / "out.gguf")
    tensors = {t.name: t for t in out.tensors}
    up = tensors["blk.0.ffn_up.weight"]
    assert up.tensor_type == Q.Q8_0
    original = dequantize(packed, Q.Q4_1)
    rewritten = dequantize(np.asarray(up.data), Q.Q8_0).reshape(original.shape)
    assert np.abs(rewritten - original).max() <= np.abs(original).max() / 254 + 1e-6
    assert np.array_equal(np.asarray(tensors["blk.0.ffn_norm.weight"].data), norm)
    name = out.fields["general.name"]
    assert bytes(name.parts[name.data[0]]).decode() == "tiny"
    tokens = out.fields["tokenizer.ggml.tokens"]
    assert [bytes(tokens.parts[i]).decode() for i in tokens.data] == ["a", "b", "ç"]
    context = out.fields["llama.context_length"]
    assert context.parts[context.data[0]].tolist() == [128]
