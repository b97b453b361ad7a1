"""The SGLang 0.5.23 emulator's parts; `tests/sglang_emulator.py` is its front door and command line.

- `config.py`: the behaviour knobs and what is recorded;
- `model.py`: the made-up model (log-probabilities from a hash) and the radix-like cache;
- `generate_input.py`: a `/generate` body checked and split into items the way SGLang does;
- `replies.py`: what SGLang 0.5.23 answers, field for field (tests/data/sglang_0_5_23_replies.json);
- `server.py`: the routes (aiohttp), the records and the run-time controls;
- `thread.py`: the emulator on its own event loop, for synchronous tests.
"""
