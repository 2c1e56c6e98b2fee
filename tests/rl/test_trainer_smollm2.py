"""One real update of the embedded SmolLM2 with the paper defaults (lr 1e-6, 5 warm-up steps, KL 0.01)."""

from __future__ import annotations

import pytest
import torch

from searchplay.config import Params
from searchplay.rl import PolicyTrainer, TrainingSample


@pytest.mark.slow
def test_smollm2_update_changes_weights_and_keeps_information_masked(smollm2_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    params = Params.model_validate({"models": {"device": "cpu", "dtype": "float32"}})
    trainer = PolicyTrainer(str(smollm2_path), params)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Where is ETH Zurich?"}],
                                           add_generation_prompt=True, tokenize=True, return_dict=False)
    think = tokenizer("<think>ETH Zurich is in Zurich.</think><search>ETH Zurich</search>")["input_ids"]
    info = tokenizer("<information>Doc 1(Title: ETH Zurich) A university in Zurich.</information>")["input_ids"]
    answer = tokenizer("<answer>Switzerland</answer>")["input_ids"]
    response = think + info + answer
    mask = [1] * len(think) + [0] * len(info) + [1] * len(answer)
    samples = [TrainingSample(prompt, response, mask, [1.0 if m else 0.0 for m in mask]),
               TrainingSample(prompt, answer, [1] * len(answer), [-1.0] * len(answer))]
    before = [p.detach().clone() for p in list(trainer.model.parameters())[:3]]
    stats = trainer.step(samples)
    assert stats["weights_changed"] == 1.0 and stats["kl"] == 0.0
    assert stats["lr"] == pytest.approx(1e-6 / 5) and stats["tokens"] == len(think) + 2 * len(answer)
    assert any(not torch.equal(b, p) for b, p in zip(before, trainer.model.parameters(), strict=False))
