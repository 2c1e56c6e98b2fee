"""Test-only fakes for the eval stage: a scripted trajectory, a character-level tokenizer behind a backend,
and a judge that records its name."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


class FakeTrajectory:
    """The fields of ``searchplay.agent.trajectory.Trajectory`` that the runner reads."""

    def __init__(self, answer: str):
        self.answer, self.valid, self.finish_reason, self.turns, self.search_queries = answer, True, "answer", [], []
        self.num_searches = 0
        self.response_ids = [ord(ch) for ch in f"<search>q</search><information>doc</information><answer>{answer}"]


class CharTokenizer:
    """Token id = code point: enough to check that the full output is decoded from the response ids."""

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)


class FakeBackend:
    tokenizer = CharTokenizer()


class FakeJudge:
    """Exact string equality with the first gold; named so reports can be checked for the judge name."""

    name = "fake-judge"

    def judge_many(self, items):
        return [SimpleNamespace(correct=p == g[0], method="exact", judge_model=self.name) for _, p, g in items]


@pytest.fixture
def fake_judge() -> FakeJudge:
    return FakeJudge()


@pytest.fixture
def fake_trajectory() -> type[FakeTrajectory]:
    return FakeTrajectory


@pytest.fixture
def fake_backend() -> FakeBackend:
    return FakeBackend()


class FakeSearch:
    """Every query finds one document about Lima (so only questions with the gold 'Lima' are found)."""

    def search(self, queries, top_k=3):
        from searchplay.retrieval.types import Document

        return [[Document("0", "Lima", "Lima is the capital of Peru.")] for _ in queries]


@pytest.fixture
def fake_search() -> FakeSearch:
    return FakeSearch()
