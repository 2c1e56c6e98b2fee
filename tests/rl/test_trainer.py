"""PolicyTrainer on a tiny random Llama: real forward/backward, AdamW, accelerate on CPU."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from searchplay.config import ConfigError, Params
from searchplay.rl import PolicyTrainer, TrainingSample
from searchplay.rl.trainer import combine_stats, require_supported_sharding
from tests.rl.conftest import tiny_params

PROMPT = [1, 10, 11, 12]


def _sample(response, mask, advantage, prompt=PROMPT, **kw):
    return TrainingSample(prompt, response, mask, [advantage if m else 0.0 for m in mask], **kw)


def test_first_step_is_on_policy_with_zero_kl_and_changes_weights(tiny_model_path):
    trainer = PolicyTrainer(tiny_model_path, tiny_params(loss_agg_mode="token-mean"))
    samples = [_sample([20, 21, 22], [1, 1, 1], 1.0), _sample([30, 31], [1, 1], -1.0, prompt=[1, 13])]
    stats = trainer.step(samples)
    assert stats["kl"] == 0.0 and stats["ratio_mean"] == pytest.approx(1.0) and stats["clip_frac"] == 0.0
    assert stats["tokens"] == 5 and stats["lr"] == pytest.approx(1e-2) and stats["weights_changed"] == 1.0
    assert stats["grad_norm"] > 0 and stats["entropy"] > 0
    assert stats["pg_loss"] == pytest.approx(-(3 * 1.0 + 2 * -1.0) / 5, abs=1e-6)  # token-mean of -A at ratio 1
    assert trainer.step(samples)["kl"] > 0  # now the policy has moved away from the frozen reference


def test_default_aggregation_is_the_papers_sequence_mean(tiny_model_path):
    trainer = PolicyTrainer(tiny_model_path, tiny_params())
    samples = [_sample([20, 21, 22], [1, 1, 1], 1.0), _sample([30, 31], [1, 1], -0.5, prompt=[1, 13])]
    stats = trainer.step(samples)
    assert stats["pg_loss"] == pytest.approx(-(1.0 + -0.5) / 2, abs=1e-6)  # 1/G sum_i 1/|tau_i| sum_t -A at ratio 1


def test_grpo_update_raises_rewarded_and_lowers_penalized_tokens(tiny_model_path):
    trainer = PolicyTrainer(tiny_model_path, tiny_params())
    good, bad = _sample([20, 21, 22], [1, 1, 1], 1.0), _sample([40, 41, 42], [1, 1, 1], -1.0)
    before = trainer.compute_logprobs([good, bad])
    for _ in range(3):
        trainer.step([good, bad])
    after = trainer.compute_logprobs([good, bad])
    assert sum(after[0]) > sum(before[0]) + 0.1
    assert sum(after[1]) < sum(before[1]) - 0.1


def _embedding_grad(trainer, samples):
    captured = []
    handle = trainer.unwrapped_model.get_input_embeddings().weight.register_hook(lambda g: captured.append(g.clone()))
    trainer.step(samples)
    handle.remove()
    return sum(captured)


def test_masked_information_tokens_receive_zero_gradient(tiny_model_path):
    trainer = PolicyTrainer(tiny_model_path, tiny_params(lr=1e-9))
    # tokens 50..53 stand for a trailing <information> block: loss_mask 0, nothing scored after them
    sample = _sample([20, 21, 50, 51, 52, 53], [1, 1, 0, 0, 0, 0], 1.0)
    grad = _embedding_grad(trainer, [sample])
    assert torch.count_nonzero(grad[50:54]) == 0
    assert torch.count_nonzero(grad[20]) > 0


def test_masked_positions_do_not_enter_the_loss(tiny_model_path):
    # an <information> block in the middle: whatever advantage/old log-prob sits on it, the update is the same
    trainer = PolicyTrainer(tiny_model_path, tiny_params(lr=1e-9))
    mask = [1, 0, 0, 1, 1]
    plain = TrainingSample(PROMPT, [20, 50, 51, 21, 22], mask, [1.0, 0.0, 0.0, 1.0, 1.0])
    noisy = TrainingSample(PROMPT, [20, 50, 51, 21, 22], mask, [1.0, 1e3, -1e3, 1.0, 1.0])
    g1, g2 = _embedding_grad(trainer, [plain]), _embedding_grad(trainer, [noisy])
    assert torch.allclose(g1, g2, atol=1e-6)
    assert trainer.step([noisy])["tokens"] == 3


def test_logprobs_of_model_tokens_equal_a_full_forward(tiny_model_path):
    """The LM head runs on loss-mask-1 positions only; their values are the full model's log-softmax."""
    trainer = PolicyTrainer(tiny_model_path, tiny_params())
    samples = [_sample([20, 50, 51, 21, 22], [1, 0, 0, 1, 1], 1.0), _sample([30, 31], [1, 1], -1.0, prompt=[1, 13, 14])]
    got = trainer.compute_logprobs(samples)
    for sample, values in zip(samples, got, strict=True):
        ids = torch.tensor([sample.prompt_ids + sample.response_ids])
        with torch.no_grad():
            logp = torch.log_softmax(trainer.unwrapped_model(input_ids=ids).logits[0].float(), dim=-1)
        first = len(sample.prompt_ids)
        want = [logp[first - 1 + t, token].item() if m else 0.0
                for t, (token, m) in enumerate(zip(sample.response_ids, sample.loss_mask, strict=True))]
        assert values == pytest.approx(want, abs=1e-5)


def test_bf16_autocast_step_is_on_policy_and_learns(tiny_model_path):
    trainer = PolicyTrainer(tiny_model_path, tiny_params(autocast_bf16=True))
    good, bad = _sample([20, 21, 22], [1, 1, 1], 1.0), _sample([40, 41, 42], [1, 1, 1], -1.0)
    before = trainer.compute_logprobs([good, bad])
    stats = trainer.step([good, bad])
    assert stats["ratio_mean"] == pytest.approx(1.0) and stats["kl"] == 0.0 and stats["weights_changed"] == 1.0
    trainer.step([good, bad])
    after = trainer.compute_logprobs([good, bad])
    assert sum(after[0]) > sum(before[0]) and sum(after[1]) < sum(before[1])


def test_micro_batches_accumulate_to_the_full_batch_gradient(tiny_model_path):
    samples = [_sample([20 + i, 21, 22][: 1 + i % 3], [1] * (1 + i % 3), 1.0 - 0.5 * i) for i in range(5)]
    one = _embedding_grad(PolicyTrainer(tiny_model_path, tiny_params(micro_batch_size=8, lr=1e-9)), samples)
    many = _embedding_grad(PolicyTrainer(tiny_model_path, tiny_params(micro_batch_size=2, lr=1e-9)), samples)
    assert torch.allclose(one, many, atol=1e-6)


def test_warmup_is_linear_then_constant(tiny_model_path):
    trainer = PolicyTrainer(tiny_model_path, tiny_params(warmup_steps=2, lr=1e-3))
    sample = [_sample([20], [1], 1.0)]
    assert [trainer.step(sample)["lr"] for _ in range(3)] == pytest.approx([5e-4, 1e-3, 1e-3])
    verl = PolicyTrainer(tiny_model_path, tiny_params(warmup_steps=2, lr=1e-3, warmup_from_zero=True))
    stats = verl.step(sample)
    assert stats["lr"] == 0.0 and stats["weights_changed"] == 0.0


def test_warmup_counts_optimizer_steps_so_the_lr_reaches_its_setting(tiny_model_path):
    """The self-play schedule (a Proposer update of 1 step, then a Solver update of 2): with warmup_steps 3 the
    steps use lr/3, 2lr/3 and lr, and train/lr (the last step's) is the configured lr. Advancing the schedule
    once per update instead ran the three steps at lr/3, 2lr/3, 2lr/3 and reported lr/3."""
    from searchplay.selfplay.step import update_policy

    params = tiny_params(warmup_steps=3, lr=1e-3, proposer_mini_batches=1, solver_mini_batches=2)
    trainer = PolicyTrainer(tiny_model_path, params)
    used, step = [], trainer.step

    def recording(samples, **kwargs):  # the rate each optimizer step ran at, as the step reports it
        stats = step(samples, **kwargs)
        used.append(stats["lr"])
        return stats

    trainer.step = recording
    proposer = [_sample([20, 21], [1, 1], 1.0)]
    solver = [_sample([30 + k, 31], [1, 1], 1.0 if k % 2 else -1.0) for k in range(4)]
    roles = update_policy(trainer, proposer, solver, params.selfplay)
    assert used == pytest.approx([1e-3 / 3, 2e-3 / 3, 1e-3]) and trainer.scheduler.last_epoch == 3
    assert roles["proposer"]["lr"] == pytest.approx(1e-3 / 3)
    assert roles["solver"]["lr"] == pytest.approx(1e-3)  # the update's last step ran at the full rate
    assert combine_stats(list(roles.values()))["lr"] == pytest.approx(1e-3)  # what the loop logs as train/lr
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)  # and every later step keeps it
    assert trainer.step(proposer)["lr"] == pytest.approx(1e-3)


def test_no_optimizer_step_combines_to_zero_counts_and_undefined_losses():
    """An iteration with nothing to train on (e.g. Solver-Only without a group with a signal) logs no loss."""
    row = combine_stats([])
    assert row["optimizer_steps"] == 0 and row["tokens"] == 0 and row["weights_changed"] == 0.0
    assert all(math.isnan(row[key]) for key in ("loss", "kl", "grad_norm", "grad_norm_max", "lr"))


def _draw_rng():
    return random.random(), float(np.random.rand()), torch.rand(2).tolist()


def test_save_load_round_trip_restores_weights_optimizer_rng_and_next_step(tiny_model_path, tmp_path):
    first = [_sample([20, 21], [1, 1], 1.0), _sample([30], [1], -1.0)]
    second = [_sample([22, 23, 24], [1, 0, 1], 0.5)]
    a = PolicyTrainer(tiny_model_path, tiny_params(warmup_steps=3))
    a.step(first)
    folder = a.save(tmp_path / "ckpt")
    assert folder == tmp_path / "ckpt" and not (tmp_path / "ckpt.partial").exists()
    rng_a, stats_a = _draw_rng(), a.step(second)

    b = PolicyTrainer(tiny_model_path, tiny_params(warmup_steps=3))
    b.load(tmp_path / "ckpt")
    assert b.global_step == 1
    rng_b, stats_b = _draw_rng(), b.step(second)
    assert rng_a == rng_b
    for key in ("loss", "pg_loss", "kl", "grad_norm", "lr"):
        assert stats_a[key] == pytest.approx(stats_b[key], rel=1e-6, abs=1e-9), key
    for pa, pb in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(pa, pb)
    state_a, state_b = a.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
    assert all(torch.equal(state_a[k]["exp_avg_sq"], state_b[k]["exp_avg_sq"]) for k in state_a)


def test_moments_on_disk_train_and_checkpoint_the_same_to_the_bit(tiny_model_path, tmp_path):
    """AdamW's moments wait on disk between steps (the default on a CPU): the same steps, statistics and
    checkpoint as with them in memory, also across a save and a load."""
    batches = [[_sample([20, 21], [1, 1], 1.0), _sample([30], [1], -1.0)], [_sample([22, 23, 24], [1, 0, 1], 0.5)],
               [_sample([25, 26], [1, 1], -0.5), _sample([27], [1], 1.0)]]
    runs = {}
    for on_disk in (False, True):
        params = tiny_params(moments_on_disk=on_disk)
        trainer = PolicyTrainer(tiny_model_path, params)
        stats = [trainer.step(batches[0]), trainer.step(batches[1])]
        trainer.save(tmp_path / f"ckpt-{on_disk}")
        resumed = PolicyTrainer(tiny_model_path, params)
        resumed.load(tmp_path / f"ckpt-{on_disk}")
        stats.append(resumed.step(batches[2]))
        runs[on_disk] = (stats, resumed)
    (plain_stats, plain), (disk_stats, disk) = runs[False], runs[True]
    assert plain.savers.moments is None and disk.savers.moments.on_disk
    assert not any("exp_avg" in state for state in disk.optimizer.state.values())
    for a, b in zip(plain_stats, disk_stats, strict=True):
        assert {k: v for k, v in a.items() if k not in ("seconds", "tokens_per_s")} == \
            {k: v for k, v in b.items() if k not in ("seconds", "tokens_per_s")}
    for pa, pb in zip(plain.model.parameters(), disk.model.parameters(), strict=True):
        assert torch.equal(pa, pb)
    state_a, state_b = plain.optimizer.state_dict()["state"], disk.optimizer.state_dict()["state"]
    assert all(torch.equal(state_a[k]["exp_avg"], state_b[k]["exp_avg"]) for k in state_a)


@pytest.mark.parametrize("segmented", [False, True])
def test_a_reference_read_from_disk_for_each_pass_gives_the_same_steps(tiny_model_path, segmented, monkeypatch):
    """With the reference on disk (the default on a CPU) it is loaded for each step's reference pass and gone
    before the policy's forward; the KL, the steps and the start-change share are those of a resident one."""
    import gc
    import weakref

    batches = [[_sample([20, 21], [1, 1], 1.0), _sample([30], [1], -1.0)],
               [_sample([22, 23, 24], [1, 0, 1], 0.5), _sample([25], [1], 1.0, prompt=[1, 13])],
               [_sample([26, 27], [1, 1], -0.5), _sample([28], [1], 1.0)]]
    runs = {}
    for on_disk in (False, True):
        trainer = PolicyTrainer(tiny_model_path, tiny_params(reference_on_disk=on_disk, kl_beta=0.5,
                                                             segmented_forward=segmented))
        runs[on_disk] = (trainer, [trainer.step(batch) for batch in batches],
                         (trainer.start_change_share(), trainer.start_distance()))
    (resident, resident_stats, resident_drift), (disk, disk_stats, disk_drift) = runs[False], runs[True]
    assert resident.ref_model is not None and resident.start_weights is None and disk.start_weights is None
    assert resident_stats[-1]["kl"] > 0 and resident_drift == disk_drift and min(disk_drift) > 0
    for a, b in zip(resident_stats, disk_stats, strict=True):
        assert {k: v for k, v in a.items() if k not in ("seconds", "tokens_per_s")} == \
            {k: v for k, v in b.items() if k not in ("seconds", "tokens_per_s")}
    for pa, pb in zip(resident.model.parameters(), disk.model.parameters(), strict=True):
        assert torch.equal(pa, pb)

    loaded, real_load = [], PolicyTrainer._load_reference

    def remembered(self):
        model = real_load(self)
        loaded.append(weakref.ref(model))
        return model

    disk.step(batches[0])  # its pass takes the reference the statistics above kept
    monkeypatch.setattr(PolicyTrainer, "_load_reference", remembered)
    disk.step(batches[0])
    gc.collect()
    assert len(loaded) == 1 and loaded[0]() is None  # read once for the step's pass, not kept


def test_the_start_statistics_read_no_checkpoint_of_their_own(tiny_model_path, monkeypatch):
    """With the reference on disk, the figures after an update read it once, and that read is the one the next
    step's reference pass uses, gone before the policy's forward; asked twice, they are computed once."""
    import gc
    import weakref

    import searchplay.rl.trainer as trainer_module

    trainer = PolicyTrainer(tiny_model_path, tiny_params(reference_on_disk=True, kl_beta=0.5))
    batch = [_sample([20, 21], [1, 1], 1.0), _sample([30], [1], -1.0)]
    loaded, passes, real_load = [], [], PolicyTrainer._load_reference
    real_compare = trainer_module.compare_with_start

    def remembered(self):
        model = real_load(self)
        loaded.append(weakref.ref(model))
        return model

    def counted(*args, **kwargs):
        passes.append(1)
        return real_compare(*args, **kwargs)

    monkeypatch.setattr(PolicyTrainer, "_load_reference", remembered)
    monkeypatch.setattr(trainer_module, "compare_with_start", counted)
    trainer.step(batch)
    trainer.step(batch)  # the second step's reference pass: one read
    stats = trainer.start_statistics()  # one read, kept
    assert (trainer.start_distance(), trainer.start_change_share()) == (stats["distance"], stats["changed_share"])
    assert len(loaded) == 2 and len(passes) == 1 and stats["distance"] > 0 and stats["changed_share"] > 0
    alive_in_forward = []

    def check(module, args):
        gc.collect()
        alive_in_forward.append(loaded[-1]() is not None)

    handle = trainer.model.get_input_embeddings().register_forward_pre_hook(check)  # every forward path
    stats_step = trainer.step(batch)
    handle.remove()
    assert len(loaded) == 2 and stats_step["kl"] > 0  # the pass took the kept reference, no read of its own
    assert alive_in_forward and not any(alive_in_forward)


def test_a_start_checkpoint_written_again_stops_the_training_instead_of_changing_its_reference(
        tiny_model_path, tmp_path):
    import os
    import shutil

    start = tmp_path / "start"
    shutil.copytree(tiny_model_path, start)
    trainer = PolicyTrainer(str(start), tiny_params(reference_on_disk=True))
    batch = [_sample([20, 21], [1, 1], 1.0), _sample([30], [1], -1.0)]
    trainer.step(batch)
    weights = start / "model.safetensors"
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    with pytest.raises(RuntimeError, match="start checkpoint's weights changed"):
        trainer.step(batch)


def test_export_is_a_loadable_hf_folder_and_overwrite_is_atomic(tiny_model_path, tmp_path):
    from transformers import AutoModelForCausalLM

    trainer = PolicyTrainer(tiny_model_path, tiny_params())
    trainer.export(tmp_path / "model")
    trainer.step([_sample([20], [1], 1.0)])
    trainer.export(tmp_path / "model")  # replaces the older export
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "model")
    for p, q in zip(trainer.unwrapped_model.parameters(), reloaded.parameters(), strict=True):
        assert torch.equal(p, q)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_the_resume_state_is_torch_distributed_checkpoint_not_an_hf_folder(tiny_model_path, tmp_path):
    """``save`` writes weights and optimizer as DCP (one shard on one process), the scheduler and step beside
    them; no HF export (``export`` writes that where something reads it). A second save replaces the first."""
    from searchplay.rl.resume_state import shard_files

    trainer = PolicyTrainer(tiny_model_path, tiny_params())
    trainer.save(tmp_path / "ckpt")  # before any step: no optimizer state yet
    trainer.step([_sample([20], [1], 1.0)])
    trainer.save(tmp_path / "ckpt")
    assert len(shard_files(tmp_path / "ckpt")) == 1 and (tmp_path / "ckpt" / "random_states_0.pkl").is_file()
    assert not list((tmp_path / "ckpt").glob("*.safetensors")) and not (tmp_path / "ckpt" / "config.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_a_save_before_the_first_step_leaves_the_optimizer_as_it_was(tiny_model_path, tmp_path):
    """Asking torch for an optimizer's state before it stepped would take a zero step (AdamW's count at 1):
    the save leaves it out, and the next step is what it would have been without the save."""
    batch = [_sample([20, 21], [1, 1], 1.0)]
    saved, plain = PolicyTrainer(tiny_model_path, tiny_params()), PolicyTrainer(tiny_model_path, tiny_params())
    saved.save(tmp_path / "ckpt")
    assert not saved.optimizer.state
    saved.step(batch)
    plain.step(batch)
    resumed = PolicyTrainer(tiny_model_path, tiny_params())
    resumed.load(tmp_path / "ckpt")
    resumed.step(batch)
    for p, q, r in zip(saved.model.parameters(), plain.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(p, q) and torch.equal(p, r)


def test_bad_input_fails_clearly(tiny_model_path, tmp_path):
    trainer = PolicyTrainer(tiny_model_path, tiny_params())
    with pytest.raises(ValueError, match="no samples"):
        trainer.step([])
    with pytest.raises(ValueError, match="one value per response token"):
        TrainingSample(PROMPT, [20, 21], [1], [1.0, 1.0])
    with pytest.raises(ValueError, match="loss_mask"):
        TrainingSample(PROMPT, [20], [2], [1.0])
    (tmp_path / "gone.partial").mkdir()
    with pytest.raises(FileNotFoundError, match="unfinished"):
        trainer.load(tmp_path / "gone")


def test_update_takes_one_step_per_mini_batch_with_pi_old_from_before_the_first(tiny_model_path):
    """verl's update_actor: 2 mini-batches = 2 optimizer steps; the second slice's ratio is no longer 1
    because its pi_old was taken before the first step; the scheduler advances once per optimizer step."""
    trainer = PolicyTrainer(tiny_model_path, tiny_params(warmup_steps=4))
    samples = [_sample([20 + k, 21, 22], [1, 1, 1], 1.0 if k % 2 else -1.0) for k in range(4)]
    before = trainer.compute_logprobs(samples[2:])
    stats = trainer.update(samples, mini_batches=2)
    assert stats["optimizer_steps"] == 2 and trainer.global_step == 2 and stats["tokens"] == 12
    assert [s.old_logprobs for s in samples[2:]] == before and samples[0].old_logprobs is None
    assert trainer.scheduler.last_epoch == 2  # the warm-up counts optimizer steps (docs/decisions/rl.md L8)
    again = [_sample([20 + k, 21, 22], [1, 1, 1], 1.0) for k in range(2)]
    assert trainer.step(again)["ratio_mean"] == pytest.approx(1.0)  # a plain step stays on-policy


def test_update_with_more_mini_batches_than_samples_takes_one_step_per_sample(tiny_model_path):
    trainer = PolicyTrainer(tiny_model_path, tiny_params())
    stats = trainer.update([_sample([20, 21], [1, 1], 1.0)], mini_batches=3)
    assert stats["optimizer_steps"] == 1
    with pytest.raises(ValueError, match="no samples"):
        trainer.update([], 2)


def _all_grads(trainer, samples):  # the update's flattened gradient, captured just before its optimizer step
    trainer.optimizer.zero_grad(set_to_none=True)
    captured = []
    original = trainer.optimizer.step
    trainer.optimizer.step = lambda: captured.append(
        torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None]).clone())
    try:
        stats = trainer.step(samples)
    finally:
        trainer.optimizer.step = original
    return captured[0], stats


@pytest.mark.filterwarnings("ignore:Detected call of")  # the optimizer step is replaced by the capture
def test_segmented_forward_scores_the_same_and_keeps_the_model_token_gradient(tiny_model_path):
    """selfplay.segmented_forward: same loss and statistics, gradient truncated at unscored keys/values (and at
    earlier model turns' keys/values across them)."""
    samples = [_sample([20, 50, 51, 21, 22], [1, 0, 0, 1, 1], 1.0),
               _sample([30, 31, 52, 32], [1, 1, 0, 1], -0.5, prompt=[1, 13, 14, 15, 16])]
    exact_grad, exact = _all_grads(PolicyTrainer(tiny_model_path, tiny_params(lr=1e-9)), samples)
    seg_grad, seg = _all_grads(PolicyTrainer(tiny_model_path, tiny_params(lr=1e-9, segmented_forward=True)), samples)
    for key in ("loss", "pg_loss", "entropy", "ratio_mean", "tokens"):
        assert seg[key] == pytest.approx(exact[key], abs=1e-5), key
    cosine = torch.nn.functional.cosine_similarity(exact_grad, seg_grad, dim=0)
    assert 0.5 < cosine < 1.0 - 1e-6  # the same direction, not the same vector: prompt K/V get no gradient


def test_segmented_forward_holds_an_earlier_model_turn_fixed_across_an_unscored_run(tiny_model_path):
    """A later turn's loss reaches an earlier turn's tokens only through their keys and values. The segmented
    forward holds those fixed once an unscored run (an <information> block) came between: the cache is extended
    under no_grad there, which detaches it."""
    sample = TrainingSample(PROMPT, [20, 21, 50, 51, 30, 31, 32], [1, 1, 0, 0, 1, 1, 1],
                            [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0])  # only the second turn carries an advantage
    exact = _embedding_grad(PolicyTrainer(tiny_model_path, tiny_params(lr=1e-9)), [sample])
    segmented = _embedding_grad(PolicyTrainer(tiny_model_path, tiny_params(lr=1e-9, segmented_forward=True)),
                                [sample])
    assert torch.count_nonzero(exact[20]) > 0
    assert torch.count_nonzero(segmented[20]) == 0
    assert torch.count_nonzero(segmented[30]) > 0


@pytest.mark.filterwarnings("ignore:Detected call of")
def test_segmented_forward_matches_exactly_without_unscored_context(tiny_model_path):
    """With no unscored token after the prompt's last position the two gradients are equal except for the
    prompt's keys and values; on a one-token prompt there are none, so they match exactly."""
    samples = [_sample([20, 21, 22], [1, 1, 1], 1.0, prompt=[1]), _sample([30, 31], [1, 1], -1.0, prompt=[1])]
    exact_grad, _ = _all_grads(PolicyTrainer(tiny_model_path, tiny_params(lr=1e-9)), samples)
    seg_grad, _ = _all_grads(PolicyTrainer(tiny_model_path, tiny_params(lr=1e-9, segmented_forward=True)), samples)
    assert torch.allclose(exact_grad, seg_grad, atol=1e-6)


def test_segmented_step_learns_like_the_exact_one(tiny_model_path):
    trainer = PolicyTrainer(tiny_model_path, tiny_params(segmented_forward=True))
    good, bad = _sample([20, 21, 22], [1, 1, 1], 1.0), _sample([40, 41, 42], [1, 1, 1], -1.0)
    before = trainer.compute_logprobs([good, bad])
    assert trainer.step([good, bad])["weights_changed"] == 1.0
    trainer.step([good, bad])
    after = trainer.compute_logprobs([good, bad])
    assert sum(after[0]) > sum(before[0]) and sum(after[1]) < sum(before[1])


@pytest.mark.filterwarnings("ignore:Detected call of")
def test_the_policy_recomputes_attention_in_the_backward_for_the_same_gradient(tiny_model_path, monkeypatch):
    """The policy trains with searchplay.llm.attention's lean attention, which checkpoints the attention of a layer
    that is not itself recomputed (``recompute_layers: false``); its gradient is sdpa's bit for bit."""
    import torch.utils.checkpoint as checkpointing

    from searchplay.llm.attention import NAME

    real, checkpointed = checkpointing.checkpoint, []

    def counting(function, *args, **kwargs):
        checkpointed.append(function.__name__)
        return real(function, *args, **kwargs)

    monkeypatch.setattr(checkpointing, "checkpoint", counting)
    samples = [_sample([20, 50, 51, 21, 22], [1, 0, 0, 1, 1], 1.0), _sample([30, 31, 52, 32], [1, 1, 0, 1], -0.5)]
    lean, plain = (PolicyTrainer(tiny_model_path, tiny_params(lr=1e-9, segmented_forward=True,
                                                              recompute_layers=False)) for _ in range(2))
    assert lean.unwrapped_model.config._attn_implementation == NAME
    plain.unwrapped_model.config._attn_implementation = "sdpa"
    lean_gradient = _all_grads(lean, samples)[0]
    assert checkpointed and set(checkpointed) == {"attend"}  # the lean path ran: each layer's attention
    checkpointed.clear()
    assert torch.equal(lean_gradient, _all_grads(plain, samples)[0]) and not checkpointed


def test_layers_recomputed_in_the_backward_train_the_same_to_the_bit(tiny_model_path):
    """selfplay.recompute_layers ('auto': true on a CPU) changes what the update keeps for its backward, not the
    step: the same statistics and the same weights after two steps, against a trainer that keeps every activation."""
    samples = [_sample([20, 50, 51, 21, 22], [1, 0, 0, 1, 1], 1.0), _sample([30, 31, 52, 32], [1, 1, 0, 1], -0.5),
               _sample([33, 34], [1, 1], 0.25)]
    auto = PolicyTrainer(tiny_model_path, tiny_params(segmented_forward=True, recompute_layers="auto"))
    assert auto.savers.recompute_layers is True  # so the default on a CPU is the recomputed side below
    trainers = [PolicyTrainer(tiny_model_path, tiny_params(segmented_forward=True, recompute_layers=choice))
                for choice in (True, False)]
    assert [t.savers.recompute_layers for t in trainers] == [True, False]
    for _ in range(2):
        recomputed, other = (trainer.step(samples) for trainer in trainers)
        assert {k: v for k, v in recomputed.items() if "second" not in k and "per_s" not in k} == \
               {k: v for k, v in other.items() if "second" not in k and "per_s" not in k}
    for mine, theirs in zip(*(t.model.parameters() for t in trainers), strict=True):
        assert torch.equal(mine, theirs)


LONG_PROMPT = [1, *range(3, 23)]  # 21 tokens: longer than prefix_kv.MIN_SHARED_TOKENS


def _grouped_samples():
    """A group of three rollouts of one long prompt and a prompt sharing its first 18 tokens, as in self-play."""
    other = [*LONG_PROMPT[:18], 40, 41, 42]
    return [_sample([20, 50, 51, 21, 22], [1, 0, 0, 1, 1], 1.0, prompt=LONG_PROMPT),
            _sample([30, 31, 52, 32], [1, 1, 0, 1], -0.5, prompt=LONG_PROMPT),
            _sample([33, 34], [1, 1], 0.25, prompt=LONG_PROMPT),
            _sample([35, 53, 36], [1, 0, 1], -1.0, prompt=other)]


@pytest.mark.filterwarnings("ignore:Detected call of")
def test_shared_prompt_prefixes_give_the_same_update(tiny_model_path, monkeypatch):
    """The update runs a prompt prefix its samples share once (searchplay.prefix_kv): the same loss, statistics
    and gradient as running every sample's prompt on its own."""
    import searchplay.rl.forward as forward_module

    samples = _grouped_samples()
    shared = PolicyTrainer(tiny_model_path, tiny_params(lr=1e-9, segmented_forward=True))
    built = []
    original_build = forward_module.PrefixStore.build
    monkeypatch.setattr(forward_module.PrefixStore, "build",
                        lambda self, decoder, config, prefixes: (built.extend(prefixes),
                                                                 original_build(self, decoder, config, prefixes)))
    shared_grad, shared_stats = _all_grads(shared, samples)
    assert sorted(len(p) for p in built) == [18, 20]  # the 18 tokens all four share, then the group's prompt
    monkeypatch.setattr(forward_module, "shared_prefixes", lambda prompts, limits: [])
    alone_grad, alone_stats = _all_grads(PolicyTrainer(tiny_model_path, tiny_params(lr=1e-9, segmented_forward=True)),
                                         samples)
    for key in ("loss", "pg_loss", "entropy", "ratio_mean", "tokens"):
        assert shared_stats[key] == pytest.approx(alone_stats[key], abs=1e-6), key
    assert torch.allclose(shared_grad, alone_grad, atol=1e-6)


def test_reference_and_old_logprobs_with_shared_prefixes_match_the_plain_forward(tiny_model_path):
    """pi_old (compute_logprobs) and pi_ref after a step: the per-sequence forwards after a shared prefix give
    the batched plain forward's values."""
    samples = _grouped_samples()
    plain = PolicyTrainer(tiny_model_path, tiny_params(segmented_forward=False))
    segmented = PolicyTrainer(tiny_model_path, tiny_params(segmented_forward=True))
    for mine, theirs in zip(segmented.compute_logprobs(samples), plain.compute_logprobs(samples), strict=True):
        assert np.allclose(mine, theirs, atol=1e-5)
    segmented.step(samples)  # the policy moves; the reference does not
    batch = segmented.forward.collate(samples)
    reference = segmented._load_reference()
    via_prefix = segmented.savers._reference_logprobs(samples, batch, None, reference, segmented.global_step)
    plain_values = segmented.forward.logprobs(reference, batch)[0]
    assert torch.allclose(via_prefix, plain_values, atol=1e-5)
    assert segmented.savers.reference_prefixes.entries  # kept for the next steps


def test_a_checkpoint_follows_the_umask_not_safetensors_0600(tiny_model_path, tmp_path):
    """safetensors writes 0600; every file of a checkpoint gets the mode the umask gives, as the rest of the project."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        trainer = PolicyTrainer(tiny_model_path, tiny_params())
        trainer.save(tmp_path / "ckpt")
        trainer.export(tmp_path / "model")
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.rglob("*") if p.is_file()}
    assert "model.safetensors" in modes and "trainer_state.json" in modes and set(modes.values()) == {0o644}, modes


def test_released_training_state_frees_moments_and_reference_and_refuses_to_train(tiny_model_path, tmp_path):
    """A run's last act (a phase's hand-off) reads only the policy: its log-probs are unchanged once the moments
    and the reference are gone, and a step or save that would need them raises instead of training without."""
    trainer = PolicyTrainer(tiny_model_path, tiny_params(reference_on_disk=False))
    samples = [_sample([20, 21, 22], [1, 1, 1], 1.0), _sample([30, 31], [1, 1], -1.0, prompt=[1, 13])]
    trainer.step(samples)
    assert trainer.optimizer.state and trainer.ref_model is not None
    before = trainer.compute_logprobs(samples)
    trainer.release_training_state()
    assert not trainer.optimizer.state and trainer.ref_model is None and trainer.start_weights is None
    moments = trainer.savers.moments
    assert moments is None or (not moments.on_disk and moments.bytes_on_disk == 0)
    assert all(p.grad is None for p in trainer.model.parameters())
    assert trainer.compute_logprobs(samples) == before
    assert math.isnan(trainer.start_distance()) and math.isnan(trainer.start_change_share())  # no start left
    with pytest.raises(RuntimeError, match="released"):
        trainer.step(samples)
    with pytest.raises(RuntimeError, match="released"):
        trainer.save(tmp_path / "ckpt")


def test_the_weight_fingerprint_sees_one_element_move_in_any_chunk(monkeypatch):
    """Summed a chunk at a time, the fingerprint still changes when a single element past the first chunk moves by
    one fp32 step, and stays the same when nothing moved."""
    from searchplay.rl import trainer

    monkeypatch.setattr(trainer, "FINGERPRINT_CHUNK", 7)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 2))
    before = trainer._fingerprint(model)
    assert len(before) == 2 * len(list(model.parameters())) and trainer._fingerprint(model) == before
    with torch.no_grad():
        weight = model[0].weight.view(-1)
        weight[23] = torch.nextafter(weight[23], torch.tensor(10.0))
    assert trainer._fingerprint(model) != before


def test_training_refuses_bf16_weights_in_one_line(tiny_model_path):
    """An optimizer over bf16 weights would lose every update under bf16's spacing: refused, with the fix."""
    from searchplay.config import ConfigError

    params = Params.model_validate({"models": {"device": "cpu", "dtype": "bfloat16"}})
    with pytest.raises(ConfigError, match=r"models.dtype=bfloat16.*models.dtype: float32.*autocast_bf16") as info:
        PolicyTrainer(tiny_model_path, params)
    assert "\n" not in str(info.value)


def test_a_step_at_lr_1e6_with_bf16_compute_moves_the_fp32_masters(tiny_model_path):
    """The paper's lr 1e-6 under bf16 autocast: the masters stay float32 and move (in bf16 they mostly could not)."""
    import torch

    params = Params.model_validate({"models": {"device": "cpu", "dtype": "auto"},
                                    "selfplay": {"lr": 1e-6, "warmup_steps": 0, "kl_beta": 0.0,
                                                 "autocast_bf16": True, "micro_batch_size": 2}})
    trainer = PolicyTrainer(tiny_model_path, params)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    assert {p.dtype for p in before} == {torch.float32}
    samples = [TrainingSample([1, 5, 6, 7], [8, 9, 10], [1, 1, 1], [1.0, 1.0, 1.0]),
               TrainingSample([1, 5, 6, 7], [11, 12], [1, 1], [-1.0, -1.0])]
    trainer.step(samples)
    after = list(trainer.model.parameters())
    changed = sum(int((a != b).sum()) for a, b in zip(after, before, strict=True))
    in_bf16 = sum(int((a.bfloat16() != b.bfloat16()).sum()) for a, b in zip(after, before, strict=True))
    assert {p.dtype for p in after} == {torch.float32}
    assert changed > 0.5 * sum(b.numel() for b in before)  # the fp32 masters moved almost everywhere
    assert in_bf16 < 0.05 * changed  # the same step would have been lost on bf16 weights


def test_gradient_checkpointing_recomputes_each_layer_and_trains_the_same_to_the_bit(tiny_model_path):
    """selfplay.gradient_checkpointing: the full forward's decoder layers run again in the backward (their MLP is
    entered twice a step), the statistics and weights after two steps equal a trainer that keeps every activation,
    and the model is back in eval mode after the step (generation through it keeps its cache)."""
    from searchplay.config import ConfigError

    samples = [_sample([20, 50, 51, 21, 22], [1, 0, 0, 1, 1], 1.0), _sample([30, 31, 52, 32], [1, 1, 0, 1], -0.5)]
    trainers = [PolicyTrainer(tiny_model_path, tiny_params(segmented_forward=False, gradient_checkpointing=choice,
                                                           micro_batch_size=2))
                for choice in (True, False)]
    calls = []
    for trainer in trainers:  # a pre-hook: the recomputation stops once the backward has what it needs
        mlp = trainer.unwrapped_model.model.layers[0].mlp
        mlp.register_forward_pre_hook(lambda module, args, trainer=trainer: calls.append(trainer))
    for _ in range(2):
        checkpointed, plain = (trainer.step(samples) for trainer in trainers)
        assert {k: v for k, v in checkpointed.items() if "second" not in k and "per_s" not in k} == \
               {k: v for k, v in plain.items() if "second" not in k and "per_s" not in k}
    assert calls.count(trainers[0]) == 2 * calls.count(trainers[1]) > 0
    for mine, theirs in zip(*(t.model.parameters() for t in trainers), strict=True):
        assert torch.equal(mine, theirs)
    assert not any(module.training for module in trainers[0].model.modules())
    with pytest.raises(ConfigError, match="segmented_forward=false"):
        PolicyTrainer(tiny_model_path, tiny_params(segmented_forward=True, gradient_checkpointing=True))


@pytest.mark.parametrize(("kind", "fsdp2", "message"), [("DEEPSPEED", False, "FSDP2 only"),
                                                       ("MEGATRON_LM", False, "FSDP2 only"),
                                                       ("FSDP", False, "fsdp_version 1")])
def test_a_sharding_other_than_fsdp2_is_refused_in_one_line(kind, fsdp2, message):
    """The trainer shards the policy and its reference with FSDP2 only; any other sharding stops at construction."""
    from types import SimpleNamespace

    from accelerate.utils import DistributedType

    with pytest.raises(ConfigError, match=message):
        require_supported_sharding(SimpleNamespace(distributed_type=DistributedType[kind], is_fsdp2=fsdp2))
    for allowed in (SimpleNamespace(distributed_type=DistributedType.FSDP, is_fsdp2=True),
                    SimpleNamespace(distributed_type=DistributedType.MULTI_CPU, is_fsdp2=False)):
        require_supported_sharding(allowed)
