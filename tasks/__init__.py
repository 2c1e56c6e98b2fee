"""Prefect tasks: thin wrappers that run one DVC stage each (no logic of their own)."""
