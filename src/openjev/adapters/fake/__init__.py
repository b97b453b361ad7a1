"""The fake backend: deterministic, dependency-free, for tests and demos."""
