"""Self-play seeds torch's sampling per iteration: a run repeats, and a resumed run draws what the unbroken one drew."""

import pytest

from searchplay.selfplay import loop
from searchplay.selfplay.seeding import HANDOFF, ITERATION, sampling_seed, seed_sampling
from tests.selfplay.conftest import make_params, make_runtime
from tests.selfplay.selfplay_fakes import ScriptedBackend, write_kg_pool


def test_seeds_differ_by_iteration_rank_and_purpose_and_accept_any_int():
    seeds = {sampling_seed(0, i, rank, purpose) for i in (1, 2) for rank in (0, 1) for purpose in (ITERATION, HANDOFF)}
    assert len(seeds) == 8
    assert sampling_seed(-1, 1) != sampling_seed(1, 1)
    assert all(0 <= s < 2**63 for s in seeds | {sampling_seed(-1, 1), sampling_seed(2**40, 7)})


def test_seed_sampling_fixes_torch_and_numpy_draws():
    """torch's generator for the transformers backend and vLLM on a CPU; numpy's global one, from which vLLM's GPU
    model runner draws each unseeded request's seed."""
    import numpy as np
    import torch

    seed_sampling(3, 1)
    first, first_numpy = torch.rand(4), np.random.randint(0, 2**62, size=4)
    seed_sampling(3, 1)
    assert torch.equal(torch.rand(4), first) and np.array_equal(np.random.randint(0, 2**62, size=4), first_numpy)
    seed_sampling(3, 2)
    assert not torch.equal(torch.rand(4), first) and not np.array_equal(np.random.randint(0, 2**62, size=4),
                                                                        first_numpy)


@pytest.mark.slow  # the real PolicyTrainer (tiny model), checkpoints, MLflow
def test_a_run_repeats_and_a_resumed_run_draws_what_the_unbroken_run_drew(
        tmp_path, monkeypatch, tokenizer, tiny_model_dir, trainer):
    """What each iteration's step sees of torch's generator (a rollout would sample from it) is recorded."""
    import torch

    draws: list[float] = []
    real_step = loop.step_function

    def recording(variant):
        step = real_step(variant)

        def run(*args, **kwargs):
            draws.append(torch.rand(1).item())
            return step(*args, **kwargs)
        return run

    monkeypatch.setattr(loop, "step_function", recording)

    def run(folder, iterations, resume=False):
        folder.mkdir(exist_ok=True)
        monkeypatch.chdir(folder)
        params = make_params(folder, tiny_model_dir, batch_size=2)
        records = write_kg_pool(folder / "kg", 6)
        backend = ScriptedBackend(tokenizer, [r["answer"] for r in records],
                                  {r["answer"]: r["waypoints"] for r in records})
        runtime = make_runtime(params, backend, trainer=trainer)
        loop.run_selfplay(params, "kg_wcr", iterations, resume=resume, runtime=runtime)

    torch.manual_seed(123)  # whatever ran before in the process must not matter
    run(tmp_path / "first", 2)
    unbroken = list(draws)
    assert len(unbroken) == 2 and unbroken[0] != unbroken[1]

    draws.clear()
    torch.manual_seed(456)
    run(tmp_path / "again", 2)
    assert draws == unbroken

    draws.clear()
    run(tmp_path / "resumed", 1)
    torch.manual_seed(789)  # a new process after a kill
    run(tmp_path / "resumed", 2, resume=True)
    assert draws == unbroken
