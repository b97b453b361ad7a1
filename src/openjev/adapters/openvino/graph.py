"""Edits of the OpenVINO model graph, made each time the engine loads the model (milliseconds)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import openvino as ov  # type: ignore[import-untyped]
from openvino import opset13 as ops


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


HIDDEN = "hidden"


def split_head(model: Any) -> Any:
    """Cut the language-model head off `model`, which then outputs the hidden state (`HIDDEN`) the
    head reads; return the head as a model of its own, from that hidden state to the logits.

    Compiled apart, the head can compute in float32 while the body runs in bf16 or int8: in bf16 the
    logits themselves are rounded to 8 significant bits (steps of 1/16 to 1/8 at the usual label
    logits), which puts every answer's log-odds on that grid and ties near labels exactly.
    """
    result = model.get_results()[0]
    head = result.input_value(0).get_node()
    if head.get_type_name() != "MatMul":
        raise ValueError("the model's logits do not come straight from a MatMul: not a causal language model")
    hidden = head.input_value(0)
    result.input(0).replace_source_output(hidden)
    model.output(0).get_tensor().set_names({HIDDEN})
    size = hidden.get_partial_shape()[-1]
    parameter = ops.parameter([1, 1, size.get_length()], hidden.get_element_type(), name=HIDDEN)
    head.input(0).replace_source_output(parameter.output(0))
    logits = ops.result(head.output(0))
    logits.output(0).get_tensor().set_names({"logits"})
    model.validate_nodes_and_infer_types()
    return ov.Model([logits], [parameter], "head")


STATES = "states"
_BLOCK_OUTPUT = "model.layers.self_attn.add1.layer{}"  # GenAI's name for a block's output (after its MLP)
_CACHE_VARIABLE = re.compile(r"past_key_values\.(\d+)\.")


def below(model: Any, layer: int) -> Any:
    """The blocks below `layer` alone, as a model of their own: its output (`STATES`) is every position's
    input to block `layer`, and its state variables are those blocks' KV caches.

    `openjev tune` reads the prompts through the layers it does not change with the engine that serves
    them; the blocks above, the norm and the head are not computed.
    """
    name = _BLOCK_OUTPUT.format(layer - 1)
    found = [op for op in model.get_ordered_ops() if op.get_friendly_name() == name]
    if layer < 1 or not found:
        raise ValueError(f"no output of block {layer - 1} (`{name}`) in the model: not a model GenAI built")
    kept = []
    for sink in model.get_sinks():
        matched = _CACHE_VARIABLE.match(sink.get_variable_id())
        if matched is None:
            raise ValueError(f"a state variable that is no block's KV cache: {sink.get_variable_id()}")
        if int(matched.group(1)) < layer:
            kept.append(sink)
    result = ops.result(found[0].output(0))
    result.output(0).get_tensor().set_names({STATES})
    return ov.Model([result], kept, model.get_parameters(), "below")
