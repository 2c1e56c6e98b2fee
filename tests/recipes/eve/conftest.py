"""Fixtures for the EVE recipe's tests: the self-play tests' tokenizer, tiny model and trainer (EVE's phases and
warm-start run on the same tiny model as the stages they extend)."""

from tests.selfplay.conftest import tiny_model_dir, tokenizer, trainer

__all__ = ["tiny_model_dir", "tokenizer", "trainer"]
