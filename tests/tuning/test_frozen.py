"""The states kept below the adapted layers, and prompts packed into one pass, give the logits a whole pass
gives, on a small random model; how many layers are adapted by default."""

from __future__ import annotations

import pytest
import torch

from openjev.tuning.decoder import Decoder, Shape
from openjev.tuning.examples import Reading, TrainingItem
from openjev.tuning.frozen import HeadReader, cached_tokens, freeze, shared_head
from openjev.tuning.lower import TorchLayers
from openjev.tuning.session import default_layers

pytestmark = pytest.mark.needs_torch

SHAPE = Shape(architecture="qwen2", layers=4, width=32, ffn=48, heads=4, kv_heads=2, eps=1e-6, rope_base=10000.0)
VOCAB = 50


def random_decoder(adapted: int) -> Decoder:
    generator = torch.Generator().manual_seed(7)

    def weight(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * 0.2

    kv = SHAPE.kv_heads * SHAPE.head_dim
    tensors = {"token_embd.weight": weight(VOCAB, SHAPE.width), "output_norm.weight": 1 + weight(SHAPE.width)}
    for i in range(SHAPE.layers):
        block = f"blk.{i}."
        tensors |= {
            block + "attn_norm.weight": 1 + weight(SHAPE.width),
            block + "ffn_norm.weight": 1 + weight(SHAPE.width),
            block + "attn_q.weight": weight(SHAPE.width, SHAPE.width),
            block + "attn_q.bias": weight(SHAPE.width),
            block + "attn_k.weight": weight(kv, SHAPE.width),
            block + "attn_k.bias": weight(kv),
            block + "attn_v.weight": weight(kv, SHAPE.width),
            block + "attn_v.bias": weight(kv),
            block + "attn_output.weight": weight(SHAPE.width, SHAPE.width),
            block + "ffn_gate.weight": weight(SHAPE.ffn, SHAPE.width),
            block + "ffn_up.weight": weight(SHAPE.ffn, SHAPE.width),
            block + "ffn_down.weight": weight(SHAPE.width, SHAPE.ffn),
        }
    decoder = Decoder(SHAPE, tensors, rank=4, adapted_layers=adapted)
    with torch.no_grad():
        for module in decoder.adapted():
            assert module.b is not None
            module.b.copy_(torch.randn(module.b.shape, generator=generator) * 0.2)  # a trained-looking adapter
    return decoder


def whole_pass(decoder: Decoder, token_ids: list[int], label_ids: tuple[int, ...]) -> torch.Tensor:
    """Every block over every position, the last position read: the reference."""
    cos, sin = decoder.rotation(0, len(token_ids))
    x = decoder.embedding[torch.tensor(token_ids)]
    for block in [*decoder.lower, *decoder.top]:
        x, _ = block(x, cos, sin)
    last = torch.nn.functional.rms_norm(x[-1], (SHAPE.width,), decoder.output_norm, SHAPE.eps)
    return decoder.output[torch.tensor(label_ids)] @ last


def items() -> list[TrainingItem]:
    head = (1, 2, 3, 4, 5)
    return [
        TrainingItem(
            f"i{n}",
            0,
            (*head, *range(10 + n, 14 + 2 * n)),
            (Reading((20, 21, 22 + n), (30, 31), (0, 1)), Reading((23, 24 + n), (31, 30), (1, 0))),
        )
        for n in range(3)
    ]


@pytest.mark.parametrize("adapted", [1, 2, 4])
def test_kept_states_give_the_logits_of_a_whole_pass(adapted: int) -> None:
    decoder = random_decoder(adapted)
    train = items()
    head = shared_head(train)
    assert head == (1, 2, 3, 4, 5)
    frozen = freeze(train, HeadReader(TorchLayers(decoder), head, SHAPE.width, torch.float32), "items", print)
    with torch.no_grad():
        for index, item in enumerate(train):
            for number, reading in enumerate(item.readings):
                expected = whole_pass(decoder, [*item.prefix, *reading.suffix], reading.labels)
                got = decoder.top_logits(frozen.states(index, number), reading.labels)
                assert torch.allclose(got, expected, atol=1e-5), (index, number)


@pytest.mark.parametrize("adapted", [1, 4])
def test_prompts_packed_into_one_pass_give_each_prompt_s_own_logits(adapted: int) -> None:
    decoder = random_decoder(adapted)
    train = items()
    head = shared_head(train)
    frozen = freeze(train, HeadReader(TorchLayers(decoder), head, SHAPE.width, torch.float32), "items", print)
    wanted = [(index, number) for index, item in enumerate(train) for number in range(len(item.readings))]
    labels = [train[index].readings[number].labels for index, number in wanted]
    with torch.no_grad():
        packed = decoder.packed_logits(frozen.head, [frozen.own(i, n) for i, n in wanted], labels)
        for (index, number), got in zip(wanted, packed, strict=True):
            reading = train[index].readings[number]
            expected = whole_pass(decoder, [*train[index].prefix, *reading.suffix], reading.labels)
            assert torch.allclose(got, expected, atol=1e-5), (index, number)


def test_packed_prompts_get_each_its_own_gradient() -> None:
    """A loss on one packed prompt moves the factors as that prompt alone does: nothing leaks across."""
    train = items()
    head = shared_head(train)

    def gradients(packed: bool) -> list[torch.Tensor]:
        torch.manual_seed(0)  # the factors A start from the global generator
        decoder = random_decoder(2)
        frozen = freeze(train, HeadReader(TorchLayers(decoder), head, SHAPE.width, torch.float32), "items", print)
        parts = [frozen.own(0, 0), frozen.own(1, 1)] if packed else [frozen.own(1, 1)]
        labels = [train[0].readings[0].labels, train[1].readings[1].labels][-len(parts) :]
        decoder.packed_logits(frozen.head, parts, labels)[-1][0].backward()  # type: ignore[no-untyped-call]
        return [p.grad.clone() for m in decoder.adapted() for p in (m.a, m.b) if p is not None and p.grad is not None]

    alone, packed = gradients(False), gradients(True)
    assert len(alone) == len(packed) > 0
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(alone, packed, strict=True))


def test_the_head_is_at_most_all_but_one_token_of_the_shortest_prefix() -> None:
    one = TrainingItem("a", 0, (1, 2, 3), (Reading((9,), (5, 6), (0, 1)),))
    two = TrainingItem("b", 0, (1, 2, 3, 4), (Reading((9,), (5, 6), (0, 1)),))
    assert shared_head([one, two]) == (1, 2)
    assert shared_head([]) == ()
    assert cached_tokens([one, two], (1, 2)) == (1 + 1) + (2 + 1)


def test_a_large_model_adapts_its_top_layers_by_default_and_a_small_one_all() -> None:
    deep = Shape(architecture="qwen2", layers=28, width=8, ffn=8, heads=2, kv_heads=1, eps=1e-6, rope_base=1e4)
    assert default_layers(deep, 1_500_000_000) == 4
    assert default_layers(deep, 135_000_000) == 28
