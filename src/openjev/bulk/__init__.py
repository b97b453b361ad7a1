"""`openjev run FILE`: bulk decisions, one request per input row, resumable (docs/operations.md)."""
