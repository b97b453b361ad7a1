"""openjev: a self-hosted System One API server."""

__version__ = "0.1.0"
