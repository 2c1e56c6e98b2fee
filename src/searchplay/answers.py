"""Answer normalization and metrics: exact match, substring exact match, token F1.

Shared by the rule filter (answer leaks), the judge, the warm-start's checks and evaluation, so it
lives below every stage (docs/architecture.md, "Package floors").

These are the scores Search-R1, FlashRAG and SSP report (SSP §4.1 reports LLM-as-a-judge as the
headline and EM/F1 beside it; the KG paper's Table 7 reports EM/F1). Pure functions over strings.

Two normalization schemes (``evaluate.normalization``, docs/decisions/eval.md):

- ``squad`` (default): the SQuAD v1.1 script as FlashRAG's evaluator and Search-R1 use it, quirks
  included: lowercase, drop ASCII ``string.punctuation``, drop the articles a/an/the, collapse
  whitespace; EM is equality of normalized strings (so a gold that normalizes to "" equals an empty
  prediction), sub-EM is a substring test (a gold "" is in every prediction), F1 gives a yes/no/noanswer
  side no credit unless both sides are equal; every score is the max over golds.
- ``unicode``: this project's stricter reading: Unicode folding (``Gödel`` == ``Godel``) and Unicode
  punctuation removed too, sub-EM on whole tokens, an empty normalized gold or prediction never matches.

A prediction of None (no answer extracted) scores 0 under both.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable

NORMALIZATIONS = ("squad", "unicode")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCTUATION = frozenset(string.punctuation)
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


def normalize_answer(text: str, scheme: str = "squad") -> str:
    """SQuAD v1.1 answer normalization (``squad``), or with Unicode folding and punctuation (``unicode``).

    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    >>> normalize_answer("Kurt Gödel"), normalize_answer("Kurt Gödel", "unicode")
    ('kurt gödel', 'kurt godel')
    """
    if scheme == "squad":
        text = "".join(ch for ch in text.lower() if ch not in _ASCII_PUNCTUATION)
    elif scheme == "unicode":
        text = _remove_punctuation(_fold_unicode(text).lower())
    else:
        raise ValueError(f"answer normalization {scheme!r}: expected one of {NORMALIZATIONS}")
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(golden_answers: str | Iterable[str]) -> list[str]:
    if isinstance(golden_answers, str):
        return [golden_answers]
    return [g for g in golden_answers if isinstance(g, str)]


def exact_match(prediction: str | None, golden_answers: str | Iterable[str], scheme: str = "squad") -> float:
    """1.0 if the normalized prediction equals a normalized gold answer, else 0.0 (SQuAD EM).

    >>> exact_match("the Beatles", ["Beatles", "The Fab Four"])
    1.0
    """
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction, scheme)
    if scheme == "unicode" and not pred:
        return 0.0
    return float(any(pred == normalize_answer(gold, scheme) for gold in _golds(golden_answers)))


def sub_exact_match(prediction: str | None, golden_answers: str | Iterable[str], scheme: str = "squad") -> float:
    """1.0 if a normalized gold answer occurs in the normalized prediction (Search-R1 / FlashRAG sub-EM).

    ``squad``: a plain substring test, as FlashRAG ('art' occurs in 'party'). ``unicode``: whole tokens
    only, and an empty gold never matches, so an empty prediction cannot game it.

    >>> sub_exact_match("It was Paris, France", ["Paris"]), sub_exact_match("a party", ["art"], "unicode")
    (1.0, 0.0)
    """
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction, scheme)
    golds = [normalize_answer(gold, scheme) for gold in _golds(golden_answers)]
    if scheme == "squad":
        return float(any(gold in pred for gold in golds))
    return float(any(gold and f" {gold} " in f" {pred} " for gold in golds))


def _token_f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(prediction_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(prediction_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, gold: str, scheme: str = "squad") -> float:
    """Plain SQuAD token F1 of two strings after normalization, with no yes/no special case (Arai & Ichikawa
    2026, Eq. 21).

    >>> round(token_f1("the capital is Paris", "Paris capital city"), 3)
    0.667
    """
    return _token_f1(normalize_answer(prediction, scheme).split(), normalize_answer(gold, scheme).split())


def f1_score(prediction: str | None, golden_answers: str | Iterable[str], scheme: str = "squad") -> float:
    """SQuAD token-level F1 between the prediction and the best-matching gold answer.

    As in the HotpotQA/FlashRAG scripts, 'yes'/'no'/'noanswer' on either side scores 0 unless both
    normalize to the same string.

    >>> round(f1_score("Barack Obama Jr", ["Barack Obama"]), 3)
    0.8
    """
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction, scheme)
    best = 0.0
    for gold in _golds(golden_answers):
        norm = normalize_answer(gold, scheme)
        if (pred in _SPECIAL_ANSWERS or norm in _SPECIAL_ANSWERS) and pred != norm:
            continue
        best = max(best, _token_f1(pred.split(), norm.split()))
    return best


def answer_in_documents(documents: Iterable[str], golden_answers: str | Iterable[str], scheme: str = "squad") -> bool:
    """True if a normalized gold answer occurs, as whole tokens, in a normalized document text.

    FlashRAG's retrieval recall (a gold answer "in" a retrieved document), on whole tokens: a plain
    substring test would find the gold "CA" in "Africa". An empty normalized gold never matches. The
    evaluation applies it to every document a Solver's searches returned, so it says whether search
    found the answer, apart from whether the model then read it out.

    >>> answer_in_documents(["Lima is the capital of Peru."], ["lima", "Lima, Peru"])
    True
    >>> answer_in_documents(["Africa is a continent."], ["CA"]), answer_in_documents([], ["Lima"])
    (False, False)
    """
    golds = [gold for gold in (normalize_answer(g, scheme) for g in _golds(golden_answers)) if gold]
    if not golds:
        return False
    for document in documents:
        text = f" {normalize_answer(document, scheme)} "
        if any(f" {gold} " in text for gold in golds):
            return True
    return False
