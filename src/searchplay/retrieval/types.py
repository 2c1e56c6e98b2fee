"""What a search returns, and the interface every search tool implements (in-process or HTTP)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

log = logging.getLogger(__name__)


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


def split_blank(queries: Sequence[str]) -> tuple[list[int], list[str]]:
    """Positions and texts of the non-blank queries; blank ones are logged and answered with []."""
    kept = [(i, q) for i, q in enumerate(queries) if isinstance(q, str) and q.strip()]
    if len(kept) < len(queries):
        log.warning("%d empty or whitespace-only search queries: returning no documents for them",
                    len(queries) - len(kept))
    return [i for i, _ in kept], [q for _, q in kept]
