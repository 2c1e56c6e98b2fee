"""A rollout's record: every token id as generated, the loss mask, and what happened per turn."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from searchplay.retrieval.types import Document

Role = Literal["solver", "proposer"]


@dataclass
class Turn:
    """One model generation and the environment's reply to it.

    ``start``/``end`` index the model-generated span in ``Trajectory.response_ids``; the
    environment tokens (``<information>`` block or corrective message) follow it, masked out.
    """

    text: str
    start: int
    end: int
    action: Literal["search", "answer", "question", "invalid", "truncated"]
    search_queries: list[str] = field(default_factory=list)
    documents: list[Document] = field(default_factory=list)
    env_start: int | None = None
    env_end: int | None = None
    invalid_reason: str | None = None  # why the action was invalid (corrective message follows)
    search_error: str | None = None  # the search tool's exception, when the search failed


@dataclass
class Trajectory:
    """A finished multi-turn rollout of one role on one prompt.

    ``response_ids`` holds generated and environment tokens in order; ``loss_mask[i]`` is 1 where
    the model generated ``response_ids[i]`` and 0 for environment tokens (``<information>``).
    """

    role: Role
    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]
    turns: list[Turn]
    answer: str | None = None  # last <answer> span (solver)
    question: str | None = None  # first <question> span (proposer)
    think_text: str = ""  # every <think> span, joined with newlines
    valid: bool = True  # well-formed under the protocol (papers' format validity)
    invalid_reason: str | None = None
    answer_tag_count: int = 0
    finish_reason: str = ""  # 'answer', 'question', 'max_turns', 'length', 'invalid'
    metadata: dict = field(default_factory=dict)

    @property
    def search_queries(self) -> list[str]:
        return [q for turn in self.turns for q in turn.search_queries]

    @property
    def documents(self) -> list[Document]:
        return [d for turn in self.turns for d in turn.documents]

    @property
    def num_searches(self) -> int:
        return len(self.search_queries)

    @property
    def generated_token_count(self) -> int:
        return sum(self.loss_mask)
