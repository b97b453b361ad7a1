"""Write a GGUF Qwen2 model as a Transformers checkpoint in bfloat16, for training an adapter on it.

The adapter is trained on the very weights openjev serves (the packaged Q4_K_M, dequantized), not on
the original release, so that merging it back changes only what training changed.

    python dequantize_gguf.py MODEL.gguf OUT_DIR
"""

import sys
from pathlib import Path

import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize
from transformers import AutoConfig, AutoTokenizer, Qwen2ForCausalLM

TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
LAYER = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}


def hf_name(gguf_name: str) -> str:
    base, kind = gguf_name.rsplit(".", 1)
    if base.startswith("blk."):
        _, layer, part = base.split(".", 2)
        return f"model.layers.{layer}.{LAYER[part]}.{kind}"
    return f"{TOP[base]}.{kind}"


def main() -> None:
    source, out = Path(sys.argv[1]), Path(sys.argv[2])
    config = AutoConfig.from_pretrained(source.parent, gguf_file=source.name)
    weights = {}
    for tensor in GGUFReader(source).tensors:
        shape = tuple(reversed([int(x) for x in tensor.shape]))
        values = np.array(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32).reshape(shape)
        weights[hf_name(tensor.name)] = torch.from_numpy(values).to(torch.bfloat16)
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.load_state_dict(weights, strict=True)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name).save_pretrained(out)


if __name__ == "__main__":
    main()
