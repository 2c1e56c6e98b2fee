"""Answer metrics under both schemes: ``unicode`` (stricter, edge cases below) and ``squad`` (FlashRAG's
evaluator exactly, checked against an independent reference over every gold of the shipped benchmarks)."""

from __future__ import annotations

import pytest

from searchplay.answers import answer_in_documents, exact_match, f1_score, normalize_answer, sub_exact_match


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Beatles", "beatles"),
        ("a  Tale of   Two Cities", "tale of two cities"),
        ("An apple", "apple"),
        ("Theatre", "theatre"),  # 'the' only as a whole word
        ("Anne", "anne"),
        ("U.S.A.", "usa"),
        ("Jay-Z!", "jayz"),
        ("“Castle Drogo”", "castle drogo"),  # curly quotes are Unicode punctuation
        ("1914–1918", "19141918"),  # en dash
        ("1,000", "1000"),
        ("3.14", "314"),
        ("Kurt Gödel", "kurt godel"),
        ("Ｔｏｋｙｏ １２", "tokyo 12"),  # full-width forms fold to ASCII
        ("São Paulo", "sao paulo"),
        ("ΑΘΗΝΑ", "αθηνα"),  # Greek keeps its letters, loses nothing but case
        ("東京", "東京"),
        ("\tnew\nyork  ", "new york"),
        ("", ""),
        ("the", ""),
    ],
)
def test_normalize_answer_unicode(text, expected):
    assert normalize_answer(text, "unicode") == expected


def test_exact_match_best_over_golds_and_case():
    assert exact_match("the eiffel tower", ["Big Ben", "Eiffel Tower"]) == 1.0
    assert exact_match("EIFFEL TOWER.", "Eiffel Tower") == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower"]) == 0.0


@pytest.mark.parametrize("prediction", [None, "", "   ", "the", "!!"])
def test_unicode_scheme_never_matches_an_empty_prediction(prediction):
    assert exact_match(prediction, ["", "the", "x"], "unicode") == 0.0
    assert sub_exact_match(prediction, ["", "the", "x"], "unicode") == 0.0
    assert f1_score(prediction, ["x"], "unicode") == 0.0


@pytest.mark.parametrize("prediction", ["", "   ", "the", "!!"])
def test_squad_scheme_keeps_flashrags_empty_string_quirks(prediction):
    """FlashRAG compares normalized strings: "" equals a gold that normalizes to "", and "" is in anything."""
    assert exact_match(prediction, ["the"]) == 1.0 and exact_match(prediction, ["x"]) == 0.0
    assert sub_exact_match(prediction, ["!"]) == 1.0 and sub_exact_match(prediction, ["x"]) == 0.0
    assert exact_match(None, ["the"]) == 0.0  # no answer extracted is not an empty answer


def test_numbers():
    assert exact_match("1,000", ["1000"]) == 1.0
    assert exact_match("1000", ["10000"]) == 0.0
    assert exact_match("１９４５", ["1945"], "unicode") == 1.0
    assert exact_match("１９４５", ["1945"]) == 0.0  # FlashRAG does not fold full-width digits


def test_unicode_accents():
    assert exact_match("Gödel", ["Godel"], "unicode") == 1.0
    assert exact_match("Godel", ["Gödel"], "unicode") == 1.0
    assert exact_match("Godel", ["Gödel"]) == 0.0
    assert exact_match("“Castle Drogo”", ["Castle Drogo"]) == 0.0  # curly quotes are not string.punctuation


def test_sub_exact_match_whole_tokens_or_substring():
    assert sub_exact_match("It was Paris, France.", ["paris"]) == 1.0
    assert sub_exact_match("new york city", ["New York"]) == 1.0
    assert sub_exact_match("a party", ["art"], "unicode") == 0.0
    assert sub_exact_match("a party", ["art"]) == 1.0  # FlashRAG: plain substring
    assert sub_exact_match("Paris", ["Paris, France"]) == 0.0


def test_unknown_scheme_is_a_clear_error():
    with pytest.raises(ValueError, match="squad"):
        normalize_answer("x", "nfkc")


def test_f1_score():
    assert f1_score("Barack Obama", ["Barack Obama"]) == 1.0
    assert f1_score("Barack Obama Jr", ["Barack Obama"]) == pytest.approx(0.8)
    assert f1_score("Obama", ["Barack Obama", "Obama"]) == 1.0  # best over golds
    assert f1_score("Michelle", ["Barack Obama"]) == 0.0
    assert f1_score("obama obama", ["obama"]) == pytest.approx(2 * 0.5 * 1 / 1.5)  # multiset overlap


def test_f1_yes_no_gets_no_partial_credit():
    assert f1_score("yes", ["no"]) == 0.0
    assert f1_score("yes", ["yes"]) == 1.0
    assert f1_score("no it is not", ["no"]) == 0.0  # a yes/no gold needs exactly that answer
    assert f1_score("no it is not", ["it is"]) == pytest.approx(2 * 0.5 / 1.5)
    assert f1_score("yes", ["yes indeed"]) == 0.0


def test_golds_as_string_or_list():
    assert exact_match("Paris", "paris") == 1.0
    assert f1_score("Paris", ("paris",)) == 1.0


# --- the FlashRAG evaluator, as an independent reference ------------------------------------------------
# Written from FlashRAG's flashrag/evaluator/metrics.py semantics (normalize_answer, ExactMatch, Sub_ExactMatch,
# F1_Score), not from our module: the default scheme must agree with it on every case below.


def reference_normalize(text: str) -> str:
    import re
    import string

    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def reference_scores(prediction: str, golds: list[str]) -> tuple[float, float, float]:
    from collections import Counter

    pred = reference_normalize(prediction)
    em = max(float(pred == reference_normalize(g)) for g in golds)
    sub = max(float(reference_normalize(g) in pred) for g in golds)
    f1 = 0.0
    for gold in golds:
        norm = reference_normalize(gold)
        if pred in ["yes", "no", "noanswer"] and pred != norm:
            continue
        if norm in ["yes", "no", "noanswer"] and pred != norm:
            continue
        common = Counter(pred.split()) & Counter(norm.split())
        same = sum(common.values())
        if same == 0:
            continue
        precision, recall = same / len(pred.split()), same / len(norm.split())
        f1 = max(f1, 2 * precision * recall / (precision + recall))
    return em, sub, f1


def adversarial_predictions(gold: str) -> list[str]:
    """Near misses a model writes: case, articles, punctuation, accents, extra or missing words, yes/no."""
    import unicodedata

    stripped = "".join(c for c in unicodedata.normalize("NFKD", gold) if not unicodedata.combining(c))
    words = gold.split()
    return [gold, gold.upper(), f"The {gold}.", f"“{gold}”", stripped, f"{gold} (disambiguation)",
            words[0] if words else "", " ".join(words[1:]), gold.replace("-", " "), "", "yes", "no", "an"]


def benchmark_golds() -> list[list[str]]:
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "data" / "benchmarks"
    golds = []
    for path in sorted(root.glob("*/test.jsonl")) + sorted(root.glob("*/dev.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            answers = json.loads(line).get("golden_answers") or []
            golds.append([str(a) for a in answers] or [""])
    return golds


def test_default_scheme_is_the_flashrag_evaluator_on_every_shipped_gold():
    golds = benchmark_golds()
    assert len(golds) > 1000  # the seven shipped benchmark files
    cases, wrong = 0, []
    for answers in golds:
        for prediction in {p for gold in answers[:2] for p in adversarial_predictions(gold)}:  # aliases: 2 suffice
            want = reference_scores(prediction, answers)
            got = (exact_match(prediction, answers), sub_exact_match(prediction, answers),
                   f1_score(prediction, answers))
            if any(abs(a - b) > 1e-12 for a, b in zip(got, want, strict=True)):
                wrong.append((prediction, answers, got, want))
            cases += 1
    assert cases > 10_000 and not wrong, wrong[:5]


def test_answer_in_documents_matches_whole_normalized_tokens_in_any_document():
    documents = ["Doc about Peru.", "The Holy Roman Empire was the First Reich."]
    assert answer_in_documents(documents, ["first reich", "1st reich"])
    assert answer_in_documents(documents, ["The Holy-Roman Empire"]) is False  # SQuAD drops '-' without a space
    assert answer_in_documents(documents, ["holy roman"]) and not answer_in_documents(documents, ["oly roman"])
    assert not answer_in_documents(documents, ["Lima"]) and not answer_in_documents(documents, ["", "the", "!"])
    assert answer_in_documents(["Kurt Gödel was a logician"], ["Godel"], "unicode")
    assert not answer_in_documents(["Kurt Gödel was a logician"], ["Godel"])
    assert answer_in_documents(["x"], "x") and not answer_in_documents([], ["x"])
