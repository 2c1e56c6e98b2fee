"""What a search returns, and the interface every search tool implements (in-process or HTTP)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Document:
    """One retrieved passage: corpus id, article title, passage text and the retriever's score."""

    id: str
    title: str
    text: str
    score: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


@runtime_checkable
class SearchTool(Protocol):
    """Batched search: one list of at most ``top_k`` documents per query, best first.

    An empty or whitespace-only query yields an empty list (with a logged warning), never an error.
    """

    def search(self, queries: Sequence[str], top_k: int = 3) -> list[list[Document]]: ...
