"""The embedded model on OpenVINO's CPU runtime: the default engine where the model's architecture allows.

The GGUF stays the source of truth (packaged, verified by sha256); it is converted once into an
OpenVINO model kept in the cache (`convert.py`), evaluated in exact canonical pieces (`engine.py`)
and scheduled fairly between requests (`backend.py`, `turns.py`). docs/performance.md says what
it costs and what each kind of CPU gets.
"""
