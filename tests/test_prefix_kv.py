"""Shared prefixes: which prefixes are worth one forward, and their keys and values match a plain forward."""

from __future__ import annotations

import pytest
import torch

from searchplay.prefix_kv import PrefixStore, seeded_cache, shared_prefixes


def test_shared_prefixes_are_the_common_prefixes_of_neighbours_within_limits():
    group = [1, 2, 3, 4, 5, 6]
    other = [1, 2, 3, 9, 9, 9]
    sequences = [group, other, group, [7, 8, 9]]
    assert shared_prefixes(sequences, [5, 5, 5, 2], min_length=2) == [(1, 2, 3), (1, 2, 3, 4, 5)]
    assert shared_prefixes(sequences, [5, 5, 5, 2], min_length=4) == [(1, 2, 3, 4, 5)]
    assert shared_prefixes(sequences, [2, 2, 2, 2], min_length=2) == [(1, 2)]  # cut to the limits
    assert shared_prefixes([group], [5]) == [] and shared_prefixes([], []) == []


def test_longest_finds_the_longest_stored_prefix_within_the_limit():
    store = PrefixStore()
    store.entries = {(1, 2): ["short"], (1, 2, 3, 4): ["long"], (5,): ["other"]}
    assert store.longest([1, 2, 3, 4, 8]) == (4, ["long"])
    assert store.longest([1, 2, 3, 4, 8], limit=3) == (2, ["short"])
    assert store.longest([9, 9]) == (0, None)


@pytest.fixture(scope="module")
def tiny_decoder():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128)
    return LlamaForCausalLM(config).eval()


def test_built_prefixes_hold_the_keys_and_values_of_a_plain_forward(tiny_decoder):
    """Each prefix is built on the longest shorter one; its keys and values equal one forward of the whole prefix,
    and a sequence continued from it gets the plain forward's logits."""
    decoder = tiny_decoder.get_decoder()
    short, long = tuple(range(3, 20)), tuple(range(3, 30))
    store = PrefixStore()
    with torch.no_grad():
        store.build(decoder, tiny_decoder.config, [long, short])
        assert store.computed_tokens == len(long)  # the long prefix continued from the short one
        plain = seeded_cache(tiny_decoder.config, None)
        decoder(input_ids=torch.tensor([long]), past_key_values=plain, use_cache=True)
        for (keys, values), layer in zip(store.entries[long], plain.layers, strict=True):
            assert torch.allclose(keys, layer.keys, atol=1e-6) and torch.allclose(values, layer.values, atol=1e-6)
        sequence = [*long, 40, 41, 42]
        length, layers = store.longest(sequence)
        cache = seeded_cache(tiny_decoder.config, layers)
        continued = tiny_decoder(input_ids=torch.tensor([sequence[length:]]), past_key_values=cache).logits[0]
        whole = tiny_decoder(input_ids=torch.tensor([sequence])).logits[0, length:]
    assert torch.allclose(continued, whole, atol=1e-5)
    assert store.entries[long][0][0].shape[-2] == len(long)  # the stored tensors were not extended in place
