"""What reads the prompts through the layers below the adapted ones: the serving engine, or PyTorch.

Training changes only the top blocks, so each prompt's states at the first adapted block are read
once (frozen.py). Where the model is served by OpenVINO (the default model), OpenVINO reads them: it
gives the very states the server computes, about 1.8 times as fast as PyTorch in float32 on the CPU
measured (docs/tuning.md), and PyTorch then does not load those layers at all. Elsewhere (the
llama.cpp engine) PyTorch reads them with the decoder's own blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from openjev.adapters.openvino.engine import EngineConfig, compile_properties, step_inputs
from openjev.domain.errors import StartupError
from openjev.tuning.decoder import KV, Decoder

Past = TypeVar("Past")


class LowerLayers(Protocol[Past]):
    """Reads tokens through the unchanged layers, after what `past` (from an earlier read) holds."""

    def read(self, token_ids: Sequence[int], past: Past | None) -> tuple[torch.Tensor, Past]:
        """The states of `token_ids` at the first adapted block (positions after `past`'s), and what a read
        that continues them needs."""
        ...


class TorchLayers:
    """The decoder's own blocks below the adapted ones (float32, or bfloat16 with `--dtype`)."""

    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder

    def read(self, token_ids: Sequence[int], past: list[KV] | None) -> tuple[torch.Tensor, list[KV]]:
        return self.decoder.frozen_states(token_ids, past or ())


class OpenVINOLayers:
    """The served OpenVINO model cut above the last unchanged block, compiled as the server compiles it."""

    def __init__(self, model_xml: Path, layer: int, *, threads: int, int8_activations: bool, dtype: torch.dtype):
        import openvino as ov  # type: ignore[import-untyped]

        from openjev.adapters.openvino.graph import below

        self._tensor = ov.Tensor
        self.dtype = dtype
        config = EngineConfig(model_xml, threads=threads, context=0, int8_activations=int8_activations)
        try:
            core = ov.Core()
            model = below(core.read_model(model_xml), layer)
            self._request = core.compile_model(model, "CPU", compile_properties(config)).create_infer_request()
        except (RuntimeError, ValueError) as exc:
            raise StartupError(f"OpenVINO could not read the blocks below {layer} of {model_xml}: {exc}") from None

    def read(
        self, token_ids: Sequence[int], past: tuple[int, dict[str, Any]] | None
    ) -> tuple[torch.Tensor, tuple[int, dict[str, Any]]]:
        request = self._request
        start = 0
        if past is None:
            request.reset_state()
        else:
            start, arrays = past
            for state in request.query_state():
                state.state = self._tensor(arrays[state.name])
        request.infer(step_inputs(token_ids, start))
        states = torch.from_numpy(request.get_output_tensor(0).data[0].copy()).to(self.dtype)
        kept = {state.name: state.state.data.copy() for state in request.query_state()}
        return states, (start + len(token_ids), kept)
