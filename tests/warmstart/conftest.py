"""Fixtures for the warm-start tests: SmolLM2's tokenizer and a tiny random-init model with its vocabulary."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tokenizer(smollm2_path: Path):
    from searchplay.llm.tokenizer import load_tokenizer

    return load_tokenizer(str(smollm2_path))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tokenizer) -> Path:
    from tests.selfplay.conftest import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama-ws"), tokenizer)
