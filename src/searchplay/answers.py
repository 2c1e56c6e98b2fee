"""Answer normalization and metrics: SQuAD normalization, exact match, substring exact match, token F1.

Shared by the rule filter (answer leaks), the judge, the warm-start's checks and evaluation, so it
lives below every stage (DESIGN.md, "Floors run one way").

These are the scores Search-R1, FlashRAG and SSP report (SSP §4.1 reports LLM-as-a-judge as the
headline and EM/F1 beside it; the KG paper's Table 7 reports EM/F1). Pure functions over strings.

Normalization follows the SQuAD v1.1 evaluation script (Rajpurkar et al. 2016), as copied by
FlashRAG and SSP's ``qa_em.py``: lowercase, remove punctuation, remove the articles a/an/the,
collapse whitespace. Two additions (docs/decisions/agent.md, "metrics"): Unicode compatibility
folding with accents stripped (``Gödel`` == ``Godel``, full-width digits == ASCII digits), and
Unicode punctuation removed as well as ASCII punctuation (curly quotes, en dashes).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
# HotpotQA / FlashRAG F1: a yes/no/noanswer prediction earns no partial credit against another gold.
_SPECIAL_ANSWERS = frozenset({"yes", "no", "noanswer"})


def _fold_unicode(text: str) -> str:
    """NFKD, drop combining marks (accents), recompose: 'Ａ１ Gödel' -> 'A1 Godel'."""
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return unicodedata.normalize("NFC", stripped)


def _remove_punctuation(text: str) -> str:
    """Drop every Unicode punctuation character (categories P*), like SQuAD's string.punctuation for ASCII.

    SQuAD removes punctuation without inserting a space, so '1,000' -> '1000' and 'Jay-Z' -> 'jayz'.
    ASCII symbols that string.punctuation lists but Unicode files as symbols ($, +, <, =, >, ^, `, |, ~)
    are removed too, to stay a superset of SQuAD.
    """
    return "".join(ch for ch in text if not (unicodedata.category(ch).startswith("P") or ch in "$+<=>^`|~"))


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 answer normalization plus Unicode folding.

    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    >>> normalize_answer("Kurt Gödel")
    'kurt godel'
    """
    text = _fold_unicode(text).lower()
    text = _remove_punctuation(text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(golden_answers: str | Iterable[str]) -> list[str]:
    if isinstance(golden_answers, str):
        return [golden_answers]
    return [g for g in golden_answers if isinstance(g, str)]


def exact_match(prediction: str | None, golden_answers: str | Iterable[str]) -> float:
    """1.0 if the normalized prediction equals a normalized gold answer, else 0.0 (SQuAD EM).

    A missing or empty prediction scores 0 (an empty string never matches an empty gold).

    >>> exact_match("the Beatles", ["Beatles", "The Fab Four"])
    1.0
    """
    if not prediction:
        return 0.0
    pred = normalize_answer(prediction)
    if not pred:
        return 0.0
    return float(any(pred == normalize_answer(gold) for gold in _golds(golden_answers)))


def sub_exact_match(prediction: str | None, golden_answers: str | Iterable[str]) -> float:
    """1.0 if a normalized gold answer occurs in the normalized prediction (Search-R1 / FlashRAG sub-EM).

    Matching is on whole tokens ('art' does not occur in 'party'), and an empty gold never matches,
    so an empty prediction cannot game it (anchors.md §1.15 item 6).

    >>> sub_exact_match("It was Paris, France", ["Paris"])
    1.0
    """
    if not prediction:
        return 0.0
    pred = f" {normalize_answer(prediction)} "
    for gold in _golds(golden_answers):
        norm = normalize_answer(gold)
        if norm and f" {norm} " in pred:
            return 1.0
    return 0.0


def _token_f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(prediction_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(prediction_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str | None, golden_answers: str | Iterable[str]) -> float:
    """SQuAD token-level F1 between the prediction and the best-matching gold answer.

    As in the HotpotQA/FlashRAG scripts, 'yes'/'no'/'noanswer' on either side scores 0 unless both
    normalize to the same string.

    >>> round(f1_score("Barack Obama Jr", ["Barack Obama"]), 3)
    0.8
    """
    if not prediction:
        return 0.0
    pred = normalize_answer(prediction)
    best = 0.0
    for gold in _golds(golden_answers):
        norm = normalize_answer(gold)
        if (pred in _SPECIAL_ANSWERS or norm in _SPECIAL_ANSWERS) and pred != norm:
            continue
        best = max(best, _token_f1(pred.split(), norm.split()))
    return best
