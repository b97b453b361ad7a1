"""Teaching the embedded model a user's own decisions: `openjev tune` trains a LoRA adapter on labelled items.

`examples` turns labelled items into the token ids the server sends (no torch); `decoder` is the
GGUF model in PyTorch with LoRA factors; `trainer` runs the steps, checkpoints and keeps the best;
`adapter_file` writes the adapter openjev merges and its manifest (no torch); `cli` wires the
command. PyTorch is the optional `tune` dependency group: only `decoder`, `frozen`, `lower`, `memory`,
`trainer` and `session` import it.

`generators` makes labelled sets to tune on and measure with, each label right by construction, and
`generate_cli` wires `openjev generate NAME COUNT`: pure Python, no torch or numpy, so it runs under
plain `uv run openjev`.
"""
