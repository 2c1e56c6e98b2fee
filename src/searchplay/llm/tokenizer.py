"""Tokenizer loading and chat-template prompt encoding (token ids, generation prompt added)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_GENERIC_CLASSES = {"TokenizersBackend", "PreTrainedTokenizerFast"}  # tokenizer.json alone defines these


def load_tokenizer(model: str) -> Any:
    """A transformers tokenizer for ``model`` (bundled alias, local folder or hub id), left-padding.

    Left padding because batched generation appends on the right; a pad token falls back to EOS.
    """
    from searchplay.assets import resolve

    path = Path(resolve(model))
    config = path / "tokenizer_config.json"
    if config.is_file() and json.loads(config.read_text()).get("tokenizer_class") in _GENERIC_CLASSES:
        # AutoTokenizer resolves the model config first, which imports torch (~25 s on a busy 2-core box).
        from transformers import PreTrainedTokenizerFast

        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path))
    else:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(resolve(model)))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def encode_prompt(tokenizer: Any, messages: list[dict]) -> list[int]:
    """Token ids of ``messages`` under the model's chat template, with the assistant generation prompt."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError(f"{getattr(tokenizer, 'name_or_path', 'tokenizer')} has no chat template; "
                         "use an instruct/chat model or set tokenizer.chat_template")
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
