"""What EVE reads of a rollout: the returned snippets its verbatim check and F_ans look in."""

from __future__ import annotations

from searchplay.agent.trajectory import Trajectory, Turn
from searchplay.recipes.eve.output import returned_snippets
from searchplay.recipes.eve.rewards import is_verbatim
from searchplay.retrieval.types import Document

LOUVRE = Document("7", "Louvre", "The Louvre is the world's most-visited art museum.\nIt stands in Paris.", 1.0)


def searched(*documents: Document) -> Trajectory:
    return Trajectory("proposer", [1], [2], [1], [Turn("<search>louvre</search>", 0, 1, "search", ["louvre"],
                                                       list(documents))])


def test_snippets_are_the_documents_as_the_rollout_showed_them():
    """With search.max_doc_tokens the rollout showed each document cut: a span from the cut-off part is no
    evidence the model copied, though the whole document holds it."""
    whole = returned_snippets(searched(LOUVRE))
    assert whole == ["Louvre\nThe Louvre is the world's most-visited art museum.\nIt stands in Paris."]
    cut = returned_snippets(searched(LOUVRE), tokenizer=None, max_doc_tokens=6)  # whitespace words without one
    assert cut == ["Louvre\nThe Louvre is the world's most-visited"]
    assert is_verbatim("It stands in Paris", whole) and not is_verbatim("It stands in Paris", cut)
    assert is_verbatim("the world's most-visited", cut)
