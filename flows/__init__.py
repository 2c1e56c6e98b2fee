"""Prefect flows: ``retrain`` (every stage in order) and ``evaluate`` (evaluation and report only)."""
