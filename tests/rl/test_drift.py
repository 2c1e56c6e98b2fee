"""``PolicyTrainer.start_change_share`` (logged as train/bf16_changed_share): an fp32 update below the bf16
rounding step reaches no bf16 weight, a large one does; the comparison runs chunk by chunk."""

from __future__ import annotations

import pytest
import torch

from searchplay.config import Params
from searchplay.rl import PolicyTrainer, TrainingSample
from searchplay.rl.drift import cast_snapshot, compare_with_start, evaluation_dtype

PROMPT = [1, 10, 11, 12]


@pytest.fixture(scope="module")
def bf16_exact_model_path(tiny_model_path, tmp_path_factory):
    """The tiny Llama with every weight rounded to a bf16 value (stored in fp32): a change smaller than half a
    bf16 spacing then never moves a weight's bf16 value, whichever side of a rounding midpoint it sat on."""
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(param.bfloat16().float().masked_fill(param == 0, 2.0 ** -7))  # no zero (the pad row)
    path = tmp_path_factory.mktemp("tiny-llama-bf16-exact")
    model.save_pretrained(path)
    return str(path)


def _params(rollout_dtype: str, **selfplay) -> Params:
    knobs = {"warmup_steps": 0, "micro_batch_size": 2, **selfplay}
    return Params.model_validate({"models": {"device": "cpu", "dtype": "float32"}, "selfplay": knobs,
                                  "agent": {"rollout_dtype": rollout_dtype}})


def _samples() -> list[TrainingSample]:
    return [TrainingSample(PROMPT, [20, 21, 22], [1, 1, 1], [1.0] * 3),
            TrainingSample(PROMPT, [30, 31], [1, 1], [-1.0] * 2)]


def _below_bf16_lr(path: str) -> float:
    """An AdamW rate whose first step (at most lr (1 + decay |w|) per element) stays under half the bf16 spacing
    of the smallest non-zero weight (|w| / 512 or more)."""
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32)
    smallest = min(p.abs()[p != 0].min().item() for p in model.parameters())
    assert all(bool((p != 0).all()) for p in model.parameters())  # a zero weight has no bf16 spacing to stay under
    return smallest / 4096


@pytest.mark.parametrize("kl_beta", [0.01, 0.0])  # start weights: the reference's tensors, or a bf16 copy
def test_an_update_below_the_bf16_step_changes_no_bf16_weight_and_a_large_one_does(bf16_exact_model_path, kl_beta):
    small = PolicyTrainer(bf16_exact_model_path, _params("bfloat16", lr=_below_bf16_lr(bf16_exact_model_path),
                                                         kl_beta=kl_beta))
    assert small.eval_dtype == torch.bfloat16 and small.start_change_share() == 0.0
    if kl_beta == 0.0:
        assert {t.dtype for t in small.start_weights} == {torch.bfloat16}  # stored once, in bf16
    stats = small.step(_samples())
    assert stats["weights_changed"] == 1.0  # the fp32 weights moved ...
    assert small.start_change_share() == 0.0  # ... but no bf16 value did: no answer can change

    large = PolicyTrainer(bf16_exact_model_path, _params("bfloat16", lr=1e-2, kl_beta=kl_beta))
    large.step(_samples())
    assert 0.1 < large.start_change_share() <= 1.0


def test_the_same_small_update_counts_when_rollouts_use_the_model_dtype(bf16_exact_model_path):
    trainer = PolicyTrainer(bf16_exact_model_path, _params("model", lr=_below_bf16_lr(bf16_exact_model_path)))
    assert trainer.eval_dtype == torch.float32
    trainer.step(_samples())
    assert trainer.start_change_share() > 0


def test_the_share_turns_at_half_a_bf16_spacing(bf16_exact_model_path):
    """Every weight moved by |w| / 1024 (under half its bf16 spacing, |w| / 512 or more): no bf16 value changes,
    every fp32 value does; moved by |w| / 128 (at least one spacing): every bf16 value changes. A trainer each:
    the figures are computed once per optimizer step, and these moves are made outside one."""
    for factor, share in ((1 + 2.0 ** -10, 0.0), (1 + 2.0 ** -7, 1.0)):
        trainer = PolicyTrainer(bf16_exact_model_path, _params("bfloat16", kl_beta=0.0))
        start = [p.detach().clone() for p in trainer.model.parameters()]
        with torch.no_grad():
            for param in trainer.model.parameters():
                param.mul_(factor)
        assert trainer.start_change_share() == share
        assert compare_with_start(trainer.model.parameters(), start, torch.float32)[1:] == (
            sum(p.numel() for p in start),) * 2


def test_the_start_is_kept_across_load(bf16_exact_model_path, tmp_path):
    """A resumed run compares with the weights self-play started from, not with the checkpoint it loaded."""
    moved = PolicyTrainer(bf16_exact_model_path, _params("bfloat16", lr=1e-2, kl_beta=0.0))
    moved.step(_samples())
    moved.save(tmp_path / "ckpt")
    resumed = PolicyTrainer(bf16_exact_model_path, _params("bfloat16", lr=1e-2, kl_beta=0.0))
    resumed.load(tmp_path / "ckpt")
    assert resumed.start_change_share() == pytest.approx(moved.start_change_share()) and moved.start_change_share() > 0


def test_the_comparison_with_the_start_runs_chunk_by_chunk_in_the_given_dtype():
    start = [torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), torch.ones(2, 3)]
    snapshot = cast_snapshot(start, torch.bfloat16)
    now = [start[0].clone(), start[1].clone()]
    now[0][1] += 1e-4  # below bf16's spacing at 2 (2^-6)
    now[0][4] += 0.5  # above it
    squares = (now[0] - start[0]).double().square().sum().item()
    for chunk in (1, 2, 4, 100):
        assert compare_with_start(now, start, torch.float32, chunk) == (pytest.approx(squares), 2, 11)
        assert compare_with_start(now, snapshot, torch.bfloat16, chunk)[1:] == (1, 11)
        assert compare_with_start(now, start, torch.bfloat16, chunk)[1:] == (1, 11)  # fp32 start, cast per chunk
    now[1][1, 2] = float("nan")
    assert compare_with_start(now, start, torch.bfloat16)[1:] == (2, 11)  # a NaN counts as changed
    with pytest.raises(ValueError, match="elements"):
        compare_with_start([torch.ones(3)], [torch.ones(2)], torch.bfloat16)


def test_evaluation_dtype_follows_the_rollout_setting():
    assert evaluation_dtype(_params("bfloat16"), "cpu", torch.float32) == torch.bfloat16
    assert evaluation_dtype(_params("model"), "cpu", torch.float32) == torch.float32
    vllm = Params.model_validate({"agent": {"backend": "vllm", "rollout_dtype": "bfloat16"}})
    assert evaluation_dtype(vllm, "cuda", torch.float32) == torch.bfloat16  # the engine is built in it
