"""Measuring answer quality on labelled data: metrics (pure) and the `openjev eval` client."""
