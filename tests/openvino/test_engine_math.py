"""The pure parts of the engine module: compile settings, canonical pieces and label log-probabilities."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from openjev.adapters.openvino.engine import PIECE, EngineConfig, compile_properties, label_logprobs, pieces
from openjev.domain.errors import BackendError


def test_int8_activations_pick_the_weights_block_size_as_the_quantization_group() -> None:
    config = EngineConfig(model_xml=Path("model.xml"), threads=3, context=4096)
    assert compile_properties(config)["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == 32
    assert compile_properties(config)["INFERENCE_NUM_THREADS"] == 3
    off = EngineConfig(model_xml=Path("model.xml"), threads=3, context=4096, int8_activations=False)
    assert compile_properties(off)["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == 0


def test_pieces_cover_the_range_in_steps_of_piece_tokens() -> None:
    assert pieces(0, 10) == [(0, 10)]
    assert pieces(40, 40 + PIECE + 1) == [(40, 40 + PIECE), (40 + PIECE, 41 + PIECE)]
    assert pieces(5, 5) == []


def test_label_logprobs_are_the_full_softmax_and_the_mass_their_share() -> None:
    logits = np.array([2.0, 1.0, 0.0, -1.0], dtype=np.float32)
    logprobs, mass = label_logprobs(logits, [0, 2])
    total = math.log(sum(math.exp(x) for x in (2.0, 1.0, 0.0, -1.0)))
    assert logprobs == pytest.approx((2.0 - total, 0.0 - total), abs=1e-12)
    assert mass == pytest.approx(math.exp(logprobs[0]) + math.exp(logprobs[1]))
    assert label_logprobs(logits, [0, 0])[1] == pytest.approx(math.exp(logprobs[0]))  # a repeated label counts once


def test_a_non_finite_logit_is_a_backend_error() -> None:
    with pytest.raises(BackendError, match="log-probability"):
        label_logprobs(np.array([np.nan, 1.0], dtype=np.float32), [0, 1])
