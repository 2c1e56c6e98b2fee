"""A tiny random-init Llama saved to disk: real transformer code, CPU-fast."""

from __future__ import annotations

import pytest

from searchplay.config import Params

VOCAB = 64


@pytest.fixture(scope="module")
def tiny_model_path(tmp_path_factory):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4, intermediate_size=64, max_position_embeddings=128,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    path = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(path)
    return str(path)


def tiny_params(**selfplay) -> Params:
    knobs = {"lr": 1e-2, "warmup_steps": 0, "micro_batch_size": 2, **selfplay}
    return Params.model_validate({"models": {"device": "cpu", "dtype": "float32"}, "selfplay": knobs})
