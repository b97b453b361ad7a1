"""Edits of the OpenVINO model graph, made each time the engine loads the model (milliseconds)."""

from __future__ import annotations

from typing import Any

import numpy as np
from openvino import opset13 as ops  # type: ignore[import-untyped]


def last_position_only(model: Any) -> None:
    """Feed the language-model head the last position's hidden state alone.

    The converted model computes logits for every prompt token (151,936 per token, a seventh of the
    model's work on a short prompt); openjev reads the next-token distribution after the last one.
    """
    node = model.get_results()[0].input_value(0).get_node()
    while node.get_type_name() != "MatMul":
        if node.get_input_size() == 0:
            raise ValueError("the model's logits do not come from a MatMul: not a causal language model")
        node = node.input_value(0).get_node()
    hidden = node.input_value(0)
    last = ops.slice(
        hidden,
        np.array([-1], np.int64),
        np.array([np.iinfo(np.int64).max], np.int64),
        np.array([1], np.int64),
        np.array([1], np.int64),
    )
    node.input(0).replace_source_output(last.output(0))
    model.validate_nodes_and_infer_types()
