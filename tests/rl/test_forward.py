"""The update's micro-batch layout: every response token sits in the window where its logit predicts it."""

from __future__ import annotations

import torch

from searchplay.rl import TrainingSample
from searchplay.rl.forward import Forward, response_slice, sequence_mask


def test_collate_puts_each_response_token_where_its_logit_predicts_it():
    forward = Forward(torch.device("cpu"), autocast_bf16=False, sharded=False, keep_logits=True)
    long = TrainingSample([1, 10, 11, 12], [20, 21], [1, 0], [0.5, 0.0], old_logprobs=[-1.0, 0.0])
    short = TrainingSample([1, 13], [30, 31, 32], [1, 1, 1], [-1.0, -1.0, -1.0], old_logprobs=[-2.0, -3.0, -4.0])
    batch = forward.collate([long, short])
    assert batch.start == 1  # the shorter prompt's last position predicts its first response token
    assert batch.input_ids.tolist() == [[1, 10, 11, 12, 20, 21], [1, 13, 30, 31, 32, 0]]
    assert batch.attention_mask.tolist() == [[1] * 6, [1] * 5 + [0]]
    for row, sample in enumerate((long, short)):
        window = response_slice(sample, batch.start)
        assert batch.targets[row, window].tolist() == sample.response_ids
        assert batch.mask[row, window].tolist() == sample.loss_mask
        assert batch.old_logprobs[row, window].tolist() == sample.old_logprobs
    assert batch.mask.sum().item() == 4  # nothing outside the responses is scored
    assert forward.collate([long, TrainingSample([1], [2], [1], [1.0])]).old_logprobs is None  # not all have pi_old
    assert sequence_mask(long) == [0, 0, 0, 0, 1, 0]
