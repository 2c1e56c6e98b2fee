"""Masked SFT: the loss covers only trained tokens, the segmented forward gives the plain forward's loss,
and a few steps on a tiny model lower it."""

from __future__ import annotations

import math

import pytest

from searchplay.warmstart.demos import Demo, Segment
from searchplay.warmstart.sft import Run, SFTTrainer, demo_nll, forward_runs


def test_forward_runs_cover_every_input_position_once():
    mask = [0, 0, 0, 1, 1, 0, 0, 1, 1, 1]
    runs = forward_runs(mask)
    assert runs == [Run(0, 2, False), Run(2, 4, True), Run(4, 6, False), Run(6, 9, True)]
    assert [p for r in runs for p in range(r.start, r.end)] == list(range(len(mask) - 1))
    assert forward_runs([1]) == []


@pytest.fixture(scope="module")
def tiny_model(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)


def demo(seed: int = 0) -> Demo:
    import random

    rng = random.Random(seed)
    ids = [rng.randrange(100, 5000) for _ in range(60)]
    return Demo("solver", "sg", [Segment(ids[:20], False), Segment(ids[20:28], True), Segment(ids[28:50], False),
                                 Segment(ids[50:], True)])


def test_segmented_forward_gives_the_plain_forward_loss(tiny_model):
    import torch

    with torch.no_grad():
        plain, count = demo_nll(tiny_model, demo(), segmented=False)
        segmented, count_2 = demo_nll(tiny_model, demo(), segmented=True)
    assert count == count_2 == 18
    assert float(segmented) == pytest.approx(float(plain), rel=1e-4)


def test_sft_recomputes_attention_in_the_backward_for_the_same_gradient(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    from searchplay.llm.attention import NAME

    grads = {}
    for attention in ("sdpa", NAME):
        model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
        trainer = SFTTrainer(model, lr=0.0)
        assert model.config._attn_implementation == NAME
        model.config._attn_implementation = attention
        demo_nll(model, demo(), segmented=True)[0].backward()
        grads[attention] = torch.cat([p.grad.flatten() for p in trainer.parameters if p.grad is not None])
    assert torch.equal(grads["sdpa"], grads[NAME])


def test_the_loss_is_the_mean_nll_of_the_trained_tokens_only(tiny_model):
    import torch
    import torch.nn.functional as F

    sample = demo()
    ids = torch.tensor(sample.input_ids)
    with torch.no_grad():
        logits = tiny_model(input_ids=ids[None, :-1]).logits[0]
        nll = F.cross_entropy(logits, ids[1:], reduction="none")
        expected = sum(float(nll[p - 1]) for p, m in enumerate(sample.loss_mask) if m and p > 0)
        value, _ = demo_nll(tiny_model, sample, segmented=True)
    assert float(value) == pytest.approx(expected, rel=1e-4)


def test_a_few_steps_lower_the_loss(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    trainer = SFTTrainer(model, lr=1e-2, segmented=True, autocast=False)
    batch = [demo(0), demo(1)]
    losses = [trainer.step(batch)["loss"] for _ in range(8)]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0] - 1.0
    with pytest.raises(ValueError, match="no trained token"):
        trainer.step([Demo("solver", "sg", [Segment([1, 2, 3], False)])])


def test_moments_on_disk_train_the_same_weights(tiny_model_dir, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    models, trainers = [], []
    for moments_dir in (None, tmp_path):
        models.append(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32))
        trainers.append(SFTTrainer(models[-1], lr=1e-2, moments_dir=moments_dir))
    for step in range(3):
        losses = [trainer.step([demo(step), demo(step + 5)])["loss"] for trainer in trainers]
        assert losses[0] == losses[1]
    assert trainers[0].moments is None and trainers[1].moments.on_disk
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        assert torch.equal(a, b)


def test_lora_trains_only_the_adapters(tiny_model_dir):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32),
                           LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    adapters = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    assert adapters and all("lora_" in n for n in adapters)
    trainer = SFTTrainer(model, lr=1e-2)
    trainer.step([demo(0)])
    trainer.step([demo(0)])
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
    moved = [n for n, p in model.named_parameters() if n in adapters and not torch.equal(p, adapters[n])]
    assert {n.split("lora_")[1].split(".")[0] for n in moved} == {"A", "B"}  # both factors trained (B starts at 0)


def killed_at(step: int, real_step):
    """``SFTTrainer.step`` that raises KeyboardInterrupt (a kill) at its ``step``-th call."""
    calls = []

    def dies(self, batch):
        calls.append(1)
        if len(calls) == step:
            raise KeyboardInterrupt("killed")
        return real_step(self, batch)

    return dies


@pytest.mark.slow  # seven SFT steps twice on the tiny model
def test_a_warmstart_killed_after_a_save_resumes_to_the_same_weights(tiny_model_dir, tokenizer, tmp_path,
                                                                    monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM

    from searchplay.config import Params
    from searchplay.warmstart import stage
    from searchplay.warmstart.sft import SFTTrainer

    demos = [Demo("proposer_kg", "a", demo(0).segments), Demo("solver", "b", demo(1).segments),
             Demo("verifier", "c", demo(2).segments)]

    def params(folder):
        return Params.model_validate({"warmstart": {"out_dir": str(folder), "steps": 7, "save_every": 3, "lr": 1e-2,
                                                    "warmup_steps": 2, "autocast_bf16": False}})

    def fresh_model():
        return AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)

    whole = fresh_model()
    history, _ = stage.train(whole, demos, params(tmp_path / "whole"), progress=False)

    real_step = SFTTrainer.step
    monkeypatch.setattr(SFTTrainer, "step", killed_at(5, real_step))
    with pytest.raises(KeyboardInterrupt):
        stage.train(fresh_model(), demos, params(tmp_path / "cut"), progress=False)
    assert (tmp_path / "cut" / "resume" / "state.pt").is_file()  # saved after step 3
    monkeypatch.setattr(SFTTrainer, "step", real_step)
    resumed = fresh_model()
    again, _ = stage.train(resumed, demos, params(tmp_path / "cut"), progress=False)
    assert [row["step"] for row in again] == [float(s) for s in range(1, 8)]
    assert [row["loss"] for row in again] == pytest.approx([row["loss"] for row in history])
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    # kept through the check after training and the save (a kill there resumes from step 6, not step 1)...
    assert (tmp_path / "cut" / "resume" / "state.pt").is_file()
    stage.save_trained_model(resumed, tokenizer, params(tmp_path / "cut"))
    assert (tmp_path / "cut" / "model" / "config.json").is_file()
    assert not (tmp_path / "cut" / "resume").exists()  # ... and removed once the model is on disk


@pytest.mark.slow  # a few SFT steps on the tiny model
def test_a_killed_warmstart_starts_over_on_other_code(tiny_model_dir, tmp_path, monkeypatch):
    """The resume state's fingerprint holds the package's code: a run never continues on other code than it began."""
    import torch
    from transformers import AutoModelForCausalLM

    from searchplay import io
    from searchplay.config import Params
    from searchplay.warmstart import stage
    from searchplay.warmstart.sft import SFTTrainer

    demos = [Demo("proposer_kg", "a", demo(0).segments), Demo("solver", "b", demo(1).segments)]
    params = Params.model_validate({"warmstart": {"out_dir": str(tmp_path), "steps": 3, "save_every": 1,
                                                  "lr": 1e-2, "warmup_steps": 0, "autocast_bf16": False}})
    real_step = SFTTrainer.step
    monkeypatch.setattr(SFTTrainer, "step", killed_at(3, real_step))
    with pytest.raises(KeyboardInterrupt):
        stage.train(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32), demos, params,
                    progress=False)
    again = []

    def counted(self, batch):
        again.append(1)
        return real_step(self, batch)

    monkeypatch.setattr(SFTTrainer, "step", counted)
    monkeypatch.setattr(io, "code_digest", lambda: "an edited package")
    history, _ = stage.train(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32), demos,
                             params, progress=False)
    assert [row["step"] for row in history] == [1.0, 2.0, 3.0] and len(again) == 3  # all three steps again


def test_a_saved_warmstart_model_follows_the_umask(tiny_model_dir, tokenizer, tmp_path):
    """The warm-start's HF folder: model.safetensors readable by the group and others under umask 022."""
    import os
    import stat

    from transformers import AutoModelForCausalLM

    from searchplay.warmstart.stage import save_model

    old = os.umask(0o022)
    try:
        save_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), tokenizer, tmp_path / "model")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "model" / "model.safetensors").stat().st_mode) == 0o644
