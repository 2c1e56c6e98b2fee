"""Self-play on several processes (``accelerate launch``): each process rolls out its share, all see the same data.

``PolicyTrainer`` trains data-parallel on the SAME list of samples in every process and shards it itself.
Self-play keeps that invariant by making the two sources of randomness outside the trainer collective:

- the policy backend's ``generate`` runs only this process's share of the prompts and gathers every
  process's completions, in prompt order, to all processes (``ShardedBackend``);
- the judge does the same with its items (``ShardedJudge``), so an LLM judge's verdicts agree too.

Search is deterministic and ``LoopState.rng`` is seeded alike everywhere, so the rollout loop, the rewards
and the samples then agree in every process without further messages. Identical prompts (a question's G
Solver rollouts) go to the same process, so they share its prefix cache. On one process nothing is wrapped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from searchplay.llm.backend import Completion, PolicyBackend, SamplingParams


@dataclass(frozen=True)
class Processes:
    """This process's rank among ``world``; ``gather`` sends one object and returns every process's, by rank."""

    rank: int = 0
    world: int = 1
    gather: Callable[[Any], list[Any]] = lambda item: [item]
    barrier: Callable[[], None] = lambda: None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_accelerator(cls, accelerator: Any) -> Processes:
        """The processes ``accelerate launch`` / ``torchrun`` started (one when launched plainly)."""
        if accelerator is None or accelerator.num_processes == 1:
            return cls()
        from accelerate.utils import gather_object

        return cls(accelerator.process_index, accelerator.num_processes, lambda item: gather_object([item]),
                   accelerator.wait_for_everyone)


def shard_indices(items: Sequence[Any], rank: int, world: int) -> list[int]:
    """The positions this process handles: distinct items round-robin over processes, duplicates together."""
    owner: dict[Any, int] = {}
    mine = []
    for position, item in enumerate(items):
        key = tuple(item) if isinstance(item, list) else repr(item)
        if owner.setdefault(key, len(owner) % world) == rank:
            mine.append(position)
    return mine


def sharded_call(function: Callable[[list[Any], list[int]], list[Any]], items: Sequence[Any],
                 processes: Processes) -> list[Any]:
    """``function(my_items, my_positions)`` on this process's share; every result, in item order, everywhere."""
    mine = shard_indices(items, processes.rank, processes.world)
    results = function([items[i] for i in mine], mine) if mine else []
    if len(results) != len(mine):
        raise RuntimeError(f"sharded call returned {len(results)} results for {len(mine)} items")
    merged: list[Any] = [None] * len(items)
    for part in processes.gather(list(zip(mine, results, strict=True))):
        for position, result in part:
            merged[position] = result
    return merged


class ShardedBackend:
    """A ``PolicyBackend`` whose ``generate`` runs this process's share of the prompts and gathers the rest."""

    continuous_batching = False  # rollouts go turn by turn, each turn's generations sharded across processes

    def __init__(self, backend: PolicyBackend, processes: Processes):
        self.backend, self.processes = backend, processes

    @property
    def tokenizer(self) -> Any:
        return self.backend.tokenizer

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[Completion]:
        def run(shard: list[Sequence[int]], positions: list[int]) -> list[Completion]:
            local = sampling
            if sampling.allowed_tokens is not None:  # its row argument is a position in the whole batch
                allowed = sampling.allowed_tokens
                local = replace(sampling, allowed_tokens=lambda row, ids: allowed(positions[row], ids))
            if sampling.choices is not None:
                local = replace(local, choices=tuple(sampling.choices[p] for p in positions))
            return self.backend.generate(shard, local)

        return sharded_call(run, [list(p) for p in prompts], self.processes)

    def update_weights(self, model: Any) -> None:
        self.backend.update_weights(model)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


class ShardedJudge:
    """A ``Judge`` whose ``judge_many`` judges this process's share of the items and gathers the rest."""

    def __init__(self, judge: Any, processes: Processes):
        self.judge, self.processes = judge, processes

    def judge_many(self, items: Sequence[Any]) -> list[Any]:
        return sharded_call(lambda shard, _: self.judge.judge_many(shard), list(items), self.processes)

    def judge(self, question: str, prediction: str | None, golden_answers: Sequence[str]) -> Any:
        return self.judge_many([(question, prediction, list(golden_answers))])[0]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.judge, name)


def sharded(backend: Any, processes: Processes) -> Any:
    """``backend`` itself on one process, else wrapped (a ``None`` stays ``None``)."""
    return backend if backend is None or processes.world == 1 else ShardedBackend(backend, processes)


def sharded_judge(judge: Any, processes: Processes) -> Any:
    return judge if processes.world == 1 else ShardedJudge(judge, processes)
