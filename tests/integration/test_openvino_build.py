"""Building the OpenVINO model of a GGUF from nothing (SmolLM2-135M, seconds): the Q8_0 rewrite in
worker processes, GenAI's reader stopped right after it saved the model, the manifest; the engine
then loads it with its head cut to the last position and compiled apart in float32, and a second
start reuses it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from openjev.adapters.embedded.built import MANIFEST, sha256_of
from openjev.adapters.embedded.model import smollm2_path
from openjev.adapters.openvino.convert import MODEL_BIN, MODEL_XML, ensure_model, verify
from openjev.adapters.openvino.engine import EngineConfig, OpenVINOEngine
from tests.openvino.mapped import resident

pytestmark = pytest.mark.integration


def test_a_gguf_is_built_once_into_a_checked_model_the_engine_loads(tmp_path: Path) -> None:
    source = smollm2_path()
    source_sha256 = sha256_of(source)
    model_xml = ensure_model(source, source_sha256, tmp_path, workers=2)
    folder = model_xml.parent
    assert sorted(path.name for path in folder.iterdir()) == sorted([MANIFEST, MODEL_BIN, MODEL_XML])
    assert [path.name for path in tmp_path.iterdir()] == [folder.name]  # no staging folder left behind
    assert verify(folder).source_sha256 == source_sha256

    engine = OpenVINOEngine.load(EngineConfig(model_xml, threads=2, context=512))
    request = engine.new_request()
    logits = engine.evaluate(request, [1, 28, 339, 2], 0)
    assert engine.vocab_size == 49152 and logits.shape == (49152,) and np.isfinite(logits).all()
    assert request.body.get_tensor("hidden").data.shape == (1, 1, 576)  # one position's hidden state, not four
    assert request.head.get_tensor("logits").data.shape == (1, 1, 49152)
    # The head computes in float32: its logits are not rounded to bf16's 8 significant bits.
    assert np.any(logits.view(np.uint32) & 0xFFFF)

    built = (folder / MODEL_BIN).stat().st_mtime_ns
    assert ensure_model(source, source_sha256, tmp_path, workers=2) == model_xml
    assert (folder / MODEL_BIN).stat().st_mtime_ns == built


def test_after_a_call_the_engine_holds_only_the_model_file_pages_it_reads(tmp_path: Path) -> None:
    """The first call repacks the weights, reading the whole mapped file; its end gives those pages back
    (file_pages.py), and later calls compute the same bits."""
    model_xml = ensure_model(smollm2_path(), sha256_of(smollm2_path()), tmp_path, workers=2)
    weights = model_xml.with_suffix(".bin")
    engine = OpenVINOEngine.load(EngineConfig(model_xml, threads=2, context=512))
    request = engine.new_request()
    engine.advance(request, [1, 28, 339], 0)  # a step that ends no call: nothing released yet
    assert resident(weights) > 0.5 * weights.stat().st_size
    first = engine.evaluate(request, [2], 3)
    assert resident(weights) < 0.1 * weights.stat().st_size
    engine.reset(request)
    engine.advance(request, [1, 28, 339], 0)
    assert np.array_equal(engine.evaluate(request, [2], 3), first)
