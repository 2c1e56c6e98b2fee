"""Fixtures for the recipes' tests: the self-play tests' tokenizer, tiny model and trainer."""

from tests.selfplay.conftest import tiny_model_dir, tokenizer, trainer

__all__ = ["tiny_model_dir", "tokenizer", "trainer"]
