"""The layers below the adapted ones, read by OpenVINO (the engine that serves the model) or by PyTorch,
give the same states and so the same answers; `openjev tune` takes OpenVINO where OpenVINO serves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from openjev.adapters.embedded.built import sha256_of
from openjev.adapters.embedded.model import smollm2_path
from openjev.adapters.embedded.requantize import requantize
from openjev.adapters.openvino.convert import ensure_model
from openjev.tuning.decoder import load_decoder
from openjev.tuning.frozen import HeadReader
from openjev.tuning.lower import LowerLayers, OpenVINOLayers, TorchLayers
from tests.tuning.labelled import team_items, write_jsonl

pytestmark = [pytest.mark.integration, pytest.mark.needs_torch]

ADAPTED = 2  # of SmolLM2's 30 blocks


@pytest.mark.parametrize("int8_activations", [False, True])
def test_openvino_reads_the_unchanged_layers_as_pytorch_does(int8_activations: bool, tmp_path: Path) -> None:
    source = smollm2_path()
    model_xml = ensure_model(source, sha256_of(source), tmp_path, workers=2)
    # OpenVINO serves the model's weights rewritten as Q8_0 (packaged SmolLM2 is Q4_1): PyTorch takes the same.
    served = tmp_path / "q8_0.gguf"
    requantize(source, served, workers=2)
    decoder = load_decoder(served, rank=4, layers=ADAPTED, dtype=torch.float32, seed=0)
    engine = OpenVINOLayers(
        model_xml, decoder.first_adapted, threads=2, int8_activations=int8_activations, dtype=torch.float32
    )
    head = (1, 9690, 198, 2683, 359, 253, 5356, 5646, 11, 1)  # a chat header's worth of tokens
    prefix = (*head, 28, 339, 2, 1045, 30, 7, 48, 2110)
    readings = [(9, 28, 5), (13, 7)]

    def states(lower: LowerLayers[Any]) -> list[torch.Tensor]:
        """The head read once, the prefix after it, each reading after the prefix: as `freeze` reads."""
        reader = HeadReader(lower, head, decoder.shape.width, torch.float32)
        tail, past = reader.after(reader.past, prefix[len(head) :])
        return [torch.cat((reader.states, tail, reader.after(past, r)[0])) for r in readings]

    sets = [states(TorchLayers(decoder)), states(engine)]
    for by_torch, by_openvino in zip(*sets, strict=True):
        assert by_torch.shape == by_openvino.shape
        assert torch.nn.functional.cosine_similarity(by_torch, by_openvino, dim=-1).min() > 0.999
        with torch.no_grad():
            expected = torch.log_softmax(decoder.top_logits(by_torch, (28, 339, 5)), -1)
            got = torch.log_softmax(decoder.top_logits(by_openvino, (28, 339, 5)), -1)
        assert torch.allclose(got, expected, atol=1e-3), (got, expected)


def test_tune_reads_with_openvino_where_it_serves(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "train.jsonl", team_items(12, seed=1, yes_no=True))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENJEV_")}
    env |= {"OPENJEV_CACHE_DIR": str(tmp_path), "OPENJEV_ENGINE": "openvino"}
    command = [sys.executable, "-m", "openjev.cli", "tune", str(tmp_path / "train.jsonl"), "--out", str(tmp_path / "a")]
    command += ["--model", "smollm2-135m", "--layers", str(ADAPTED), "--steps", "4"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the unchanged layers are read by OpenVINO" in done.stderr
    assert (tmp_path / "a" / "manifest.json").is_file()
