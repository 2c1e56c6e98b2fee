"""Self-play on several processes: the sharding helpers, and one kg_wcr iteration on two CPU
processes (torchrun, gloo) that ends with the same weights and history as on one process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from searchplay.llm.backend import Completion, SamplingParams
from searchplay.selfplay.distributed import Processes, ShardedBackend, ShardedJudge, shard_indices, sharded_call
from tests.processes import free_port, run
from tests.selfplay.conftest import save_tiny_model
from tests.selfplay.selfplay_fakes import write_kg_pool

SCRIPT = Path(__file__).with_name("two_process_selfplay.py")
BIN = Path(sys.executable).parent


def two_processes() -> tuple[Processes, Processes]:
    """Two in-process 'ranks' whose gather returns what both sent (rank 0 runs first, then rank 1)."""
    sent: dict[int, object] = {}

    def gather_for(rank: int):
        def gather(item):
            sent[rank] = item
            return [sent.get(0, []), sent.get(1, [])]
        return gather

    return Processes(0, 2, gather_for(0)), Processes(1, 2, gather_for(1))


def test_identical_items_go_to_one_process_and_distinct_ones_alternate():
    items = [[1], [2], [1], [3], [2], [4]]
    assert shard_indices(items, 0, 2) == [0, 2, 3]  # [1] twice, then [3]
    assert shard_indices(items, 1, 2) == [1, 4, 5]  # [2] twice, then [4]
    assert shard_indices(items, 0, 1) == list(range(6))


def test_sharded_call_returns_every_result_in_item_order():
    rank0, rank1 = two_processes()
    items = ["a", "b", "c", "d"]
    sharded_call(lambda shard, _: [s.upper() for s in shard], items, rank0)
    assert sharded_call(lambda shard, _: [s.upper() for s in shard], items, rank1) == ["A", "B", "C", "D"]


class EchoBackend:
    tokenizer = None

    def __init__(self):
        self.seen: list[list[int]] = []

    def generate(self, prompts, sampling):
        self.seen += [list(p) for p in prompts]
        def constrained(row: int) -> list[int]:  # the row's allowed first tokens, or its choices' characters
            if sampling.allowed_tokens:
                return sampling.allowed_tokens(row, [])
            return [ord(text) for text in sampling.choices[row]] if sampling.choices else []

        return [Completion(list(p) + constrained(row), "", "stop") for row, p in enumerate(prompts)]


def test_sharded_backend_generates_its_share_and_remaps_constrained_rows():
    rank0, rank1 = two_processes()
    first, second = EchoBackend(), EchoBackend()
    prompts = [[10], [20], [30]]
    sampling = SamplingParams(max_new_tokens=1, allowed_tokens=lambda row, ids: [100 + row])
    ShardedBackend(first, rank0).generate(prompts, sampling)
    out = ShardedBackend(second, rank1).generate(prompts, sampling)
    assert (first.seen, second.seen) == ([[10], [30]], [[20]])
    assert [c.token_ids for c in out] == [[10, 100], [20, 101], [30, 102]]  # rows of the whole batch


def test_sharded_backend_gives_each_share_its_rows_choices():
    rank0, rank1 = two_processes()
    first, second = EchoBackend(), EchoBackend()
    sampling = SamplingParams(max_new_tokens=1, choices=(("a",), ("b", "c"), ("d",)))
    ShardedBackend(first, rank0).generate([[10], [20], [30]], sampling)
    out = ShardedBackend(second, rank1).generate([[10], [20], [30]], sampling)
    assert [c.token_ids for c in out] == [[10, ord("a")], [20, ord("b"), ord("c")], [30, ord("d")]]


def test_sharded_judge_judges_its_share():
    class CountingJudge:
        def __init__(self):
            self.items = []

        def judge_many(self, items):
            self.items += items
            return [prediction == golds[0] for _, prediction, golds in items]

    rank0, rank1 = two_processes()
    first, second = CountingJudge(), CountingJudge()
    items = [("q1", "a", ["a"]), ("q2", "b", ["c"]), ("q3", "d", ["d"])]
    ShardedJudge(first, rank0).judge_many(items)
    assert ShardedJudge(second, rank1).judge_many(items) == [True, False, True]
    assert (len(first.items), len(second.items)) == (2, 1)


@pytest.mark.slow  # two processes start torch and accelerate and train the tiny model (~1 min on 2 cores)
def test_two_process_selfplay_iteration_matches_one_process(tmp_path, tokenizer):
    import json

    import torch

    model = save_tiny_model(tmp_path / "model", tokenizer)
    outs = {}
    for name, launcher in [("one", [sys.executable]),
                           ("two", [str(BIN / "torchrun"), "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
                                    "--master_port", str(free_port())])]:
        run_dir, out = tmp_path / f"run_{name}", tmp_path / f"out_{name}"
        write_kg_pool(run_dir / "kg", 6)
        out.mkdir()
        run([*launcher, str(SCRIPT), str(model), str(run_dir), str(out)])
        outs[name] = out
    one, two = torch.load(outs["one"] / "result.pt"), torch.load(outs["two"] / "result.pt")
    assert (one["processes"], two["processes"]) == (1, 2)
    row_one, row_two = one["history"][0], two["history"][0]
    assert row_two["train/groups_nonzero_advantage"] == row_one["train/groups_nonzero_advantage"] >= 1
    for key in ("solver/reward_mean", "proposer/reward_mean", "filter/valid_rate_rule", "train/loss"):
        assert row_two[key] == pytest.approx(row_one[key], rel=1e-4, abs=1e-6), key
    for key, weight in one["state"].items():
        assert torch.allclose(two["state"][key], weight, atol=1e-4), key
    from safetensors.torch import load_file

    initial = load_file(model / "model.safetensors")
    assert any(not torch.equal(one["state"][key], weight) for key, weight in initial.items())  # it trained
    prompts = {rank: json.loads((outs["two"] / f"prompts_rank{rank}.json").read_text()) for rank in (0, 1)}
    total = json.loads((outs["one"] / "prompts_rank0.json").read_text())
    assert prompts[0] + prompts[1] == total and min(prompts.values()) > 0  # each process generated its share
    checkpoints = sorted(p.name for p in (tmp_path / "run_two" / "checkpoints" / "kg_wcr" / "resume").iterdir())
    assert "iter_000001" in checkpoints and not any(name.endswith(".partial") for name in checkpoints)
