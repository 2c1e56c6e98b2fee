"""The segmented forward's segment cache and its layers recomputed in the backward."""

from __future__ import annotations

import pytest
import torch

from searchplay.rl.segments import recomputed_layers, segment_cache, segmented_logits


def _states(length: int, grad: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    keys, values = torch.randn(1, 2, length, 4), torch.randn(1, 2, length, 4)
    return keys.requires_grad_(grad), values.requires_grad_(grad)


def _config():
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                       num_key_value_heads=2, intermediate_size=64)


def test_the_segment_layer_returns_what_a_dynamic_layer_returns():
    """A prefix, a run with gradient, a run without: the same tensors as transformers' DynamicLayer, the earlier
    positions without gradient; a rewound write lands where the first one did."""
    from transformers.cache_utils import DynamicLayer

    torch.manual_seed(0)
    prefix, scored, unscored = _states(5), _states(3, grad=True), _states(2)
    plain, mine = DynamicLayer(), segment_cache(_config(), 10, None).layers[0]
    for keys, values in (prefix, scored, unscored):
        with torch.no_grad() if not keys.requires_grad else torch.enable_grad():
            expected = plain.update(keys, values)
            got = mine.update(keys, values)
        assert all(torch.equal(a, b) for a, b in zip(expected, got, strict=True))
        assert got[0].requires_grad == keys.requires_grad
        plain.keys, plain.values = plain.keys.detach(), plain.values.detach()  # a no_grad run detaches the cache
    assert mine.get_seq_length() == 10 and torch.equal(mine.keys, plain.keys)
    mine.write_at = 5
    again = mine.update(*scored)
    assert torch.equal(again[0], torch.cat([prefix[0], scored[0]], dim=-2))
    assert mine.get_seq_length() == 10 and torch.equal(mine.values, plain.values)
    with pytest.raises(ValueError, match="10 positions"):
        mine.update(*_states(1))
    with pytest.raises(ValueError, match="bfloat16"):
        mine.update(*(t.bfloat16() for t in _states(1)))


def _tiny_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    from searchplay.llm.attention import use_lean_attention

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128)
    model = LlamaForCausalLM(config).eval()
    use_lean_attention(model)
    return model


IDS = torch.tensor([1, *range(3, 30)])
MASK = [0] * 8 + [1] * 5 + [0] * 6 + [1] + [0] * 3 + [1] * 5  # prompt, turn, <information>, 1-token turn, ...


def _forward(model, recompute: bool, autocast=None):
    model.zero_grad(set_to_none=True)
    scored = segmented_logits(model.model, model.lm_head, model.config, IDS, MASK, autocast, recompute=recompute)
    loss = sum(torch.nn.functional.cross_entropy(logits, IDS[run.start + 1:run.end + 1]) for run, logits in scored)
    loss.backward()
    return [logits.detach() for _, logits in scored], {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("bf16", [False, True])
def test_recomputed_layers_give_the_same_logits_and_gradients_to_the_bit(bf16):
    """In fp32, and under bf16 autocast, which the recomputation enters again."""
    model = _tiny_model()
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if bf16 else None
    logits, grads = _forward(model, recompute=False, autocast=autocast)
    again, regrads = _forward(model, recompute=True, autocast=autocast)
    assert len(logits) == 3 and all(torch.equal(a, b) for a, b in zip(logits, again, strict=True))
    assert grads.keys() == regrads.keys() and all(torch.equal(grads[n], regrads[n]) for n in grads)
    assert all("forward" not in vars(layer) for layer in model.model.layers)  # the layers are as they were


def _saved_bytes(model, recompute: bool) -> int:
    """Bytes autograd saves for the backward outside any checkpoint, over one segmented forward."""
    saved = []

    def pack(tensor):
        saved.append(tensor.untyped_storage().nbytes())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        segmented_logits(model.model, model.lm_head, model.config, IDS, MASK, recompute=recompute)
    return sum(saved)


def test_recomputed_layers_keep_no_activation_of_theirs():
    """Without recomputation autograd keeps each layer's activations (the MLP's, the norms'); with it, only what
    the head and the loss need."""
    model = _tiny_model()
    kept, lean = _saved_bytes(model, recompute=False), _saved_bytes(model, recompute=True)
    assert lean < kept / 4


def test_a_model_with_sliding_window_layers_keeps_the_plain_cache():
    from transformers import LlamaConfig

    sliding = LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, intermediate_size=64, sliding_window=4,
                          layer_types=["sliding_attention", "full_attention"])
    assert segment_cache(sliding, 10, None) is None
    assert segment_cache(_config(), 10, None) is not None


def test_recomputed_layers_only_checkpoint_under_gradient():
    model = _tiny_model()
    cache = segment_cache(model.config, len(IDS), None)
    with torch.no_grad(), recomputed_layers(model.model, cache):
        model.model(input_ids=IDS[None, :8], past_key_values=cache, use_cache=True)
    assert cache.get_seq_length() == 8 and all("forward" not in vars(layer) for layer in model.model.layers)
