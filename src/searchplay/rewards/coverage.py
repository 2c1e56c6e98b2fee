"""Waypoint coverage of a Solver's reasoning (KG-paths paper §3.3, Eq. 5).

Only the text inside ``<think>...</think>`` counts: search queries, ``<information>`` documents and the
``<answer>`` are excluded. The caller passes the joined think text; ``extract_think_text`` builds it.
"""

from __future__ import annotations

import re
import unicodedata

_THINK_SPAN = re.compile(r"<think>(.*?)</think>", re.DOTALL)

# Think spans are joined with a newline so no title can match across two spans (our reading of KG paper §3.3).
THINK_SEPARATOR = "\n"


def extract_think_text(response_text: str) -> str:
    """The concatenated ``<think>`` spans T^(i) of one rollout (KG-paths paper §3.3).

    Only closed spans count; text outside them (queries, documents, answers) is dropped.

    >>> extract_think_text("<think>Bern?</think><search>Bern</search><information>Bern</information>"
    ...                    "<think>Zurich</think>")
    'Bern?\\nZurich'
    """
    return THINK_SEPARATOR.join(_THINK_SPAN.findall(response_text))


def waypoint_coverage(think_text: str, waypoints: list[str], casefold: bool = False) -> float:
    """Raw waypoint coverage g_i (KG-paths paper, Eq. 5).

    g_i = |{v in W : d(v) is an exact substring of T^(i)}| / |W|. W is a set of titles, so duplicated
    titles count once in numerator and denominator; order and repeats in the text do not matter.
    Matching is exact and case-sensitive as the paper states; ``casefold=True`` (NFKC + casefold on
    both sides) is an ablation (the paper matches exact substrings). An empty waypoint list gives 0.

    >>> waypoint_coverage("Einstein studied at ETH Zurich", ["Albert Einstein", "ETH Zurich", "Zurich", "Switzerland"])
    0.5
    >>> waypoint_coverage("eth zurich", ["ETH Zurich"], casefold=True)
    1.0
    """
    titles = list(dict.fromkeys(waypoints))
    if not titles:
        return 0.0
    blank = [t for t in titles if not t.strip()]
    if blank:
        raise ValueError(f"waypoint titles must be non-empty strings; got {blank!r} in {waypoints!r} "
                         "(an empty title matches every text: fix the subgraph record's labels)")
    if casefold:
        think_text = _fold(think_text)
        titles = list(dict.fromkeys(_fold(t) for t in titles))
    return sum(title in think_text for title in titles) / len(titles)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()
