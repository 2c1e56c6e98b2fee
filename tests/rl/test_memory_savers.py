"""MemorySavers: which savers a setting turns on, and when the frozen reference is read, kept and dropped."""

from __future__ import annotations

import pytest
import torch

from searchplay.rl import TrainingSample
from searchplay.rl.forward import Forward
from searchplay.rl.memory_savers import MemorySavers
from tests.rl.conftest import tiny_params


def _savers(tiny_model_path, tmp_path, device="cpu", **knobs):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_model_path).eval()
    optimizer = torch.optim.AdamW(model.parameters())
    cfg = tiny_params(checkpoint_dir=str(tmp_path), **knobs).selfplay
    reads = []

    def load_reference():
        reads.append(1)
        return LlamaForCausalLM.from_pretrained(tiny_model_path).requires_grad_(False).eval()

    forward = Forward(torch.device(device), autocast_bf16=False, sharded=False, keep_logits=True)
    return model, MemorySavers(cfg, forward, model, optimizer, tiny_model_path, load_reference), reads


@pytest.mark.parametrize(("knobs", "on_disk", "resident", "reads"), [
    ({"kl_beta": 0.5}, True, False, 0),  # 'auto' on a CPU: read for each pass, not at the start
    ({"kl_beta": 0.5, "reference_on_disk": False}, False, True, 1),  # resident: read once, here
    ({"kl_beta": 0.0}, False, False, 0),  # no KL term: no reference at all
])
def test_the_reference_is_on_disk_resident_or_absent_as_set(tiny_model_path, tmp_path, knobs, on_disk, resident,
                                                           reads):
    _, savers, loaded = _savers(tiny_model_path, tmp_path, **knobs)
    assert savers.reference_on_disk is on_disk and (savers.reference is not None) is resident
    assert savers.keeps_reference is (knobs["kl_beta"] > 0) and len(loaded) == reads
    assert savers.moments is not None and savers.moments.on_disk is False  # 'auto' on a CPU; nothing stepped yet


def test_auto_savers_are_off_on_an_accelerator(tiny_model_path, tmp_path):
    _, savers, _ = _savers(tiny_model_path, tmp_path, device="cuda", kl_beta=0.5, segmented_forward=True)
    assert savers.moments is None and not savers.reference_on_disk and not savers.recompute_layers
    assert savers.segmented  # an explicit setting, not an 'auto' one


def test_a_reference_on_disk_is_read_for_a_pass_and_a_statistics_read_is_kept_for_the_next(tiny_model_path,
                                                                                          tmp_path):
    model, savers, loaded = _savers(tiny_model_path, tmp_path, kl_beta=0.5, segmented_forward=True)
    samples = [TrainingSample([1, 10, 11], [20, 21], [1, 1], [1.0, 1.0]),
               TrainingSample([1, 10, 11], [30], [1], [-1.0])]
    micro_batches = [(samples, 1.0)]
    savers.begin_update(model, samples, micro_batches, step=0)  # the policy is the reference: no read
    assert not loaded and savers.reference_logprobs(0, samples, savers.forward.collate(samples),
                                                    torch.zeros(2, 2), step=0) is not None
    savers.end_update()
    savers.begin_update(model, samples, micro_batches, step=1)  # read for this pass, dropped after it
    assert len(loaded) == 1 and savers.reference is None
    assert savers.reference_logprobs(0, samples, None, None, step=1).shape == (2, 2)
    savers.end_update()
    kept = savers.start_reference()
    assert kept is not None and savers.start_reference() is kept and len(loaded) == 2
    savers.begin_update(model, samples, micro_batches, step=2)  # takes the kept one: no read of its own
    assert len(loaded) == 2 and savers.reference is None
    savers.start_reference()
    savers.release()  # the training is over: the kept read goes too
    assert savers.reference is None and not savers.reference_prefixes.entries
