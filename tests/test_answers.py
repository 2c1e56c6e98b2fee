"""Answer metrics: SQuAD normalization edge cases, EM, sub-EM, token F1."""

from __future__ import annotations

import pytest

from searchplay.answers import exact_match, f1_score, normalize_answer, sub_exact_match


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
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_best_over_golds_and_case():
    assert exact_match("the eiffel tower", ["Big Ben", "Eiffel Tower"]) == 1.0
    assert exact_match("EIFFEL TOWER.", "Eiffel Tower") == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower"]) == 0.0


@pytest.mark.parametrize("prediction", [None, "", "   ", "the", "!!"])
def test_exact_match_empty_prediction_never_matches(prediction):
    assert exact_match(prediction, ["", "the", "x"]) == 0.0
    assert sub_exact_match(prediction, ["", "the", "x"]) == 0.0
    assert f1_score(prediction, ["x"]) == 0.0


def test_numbers():
    assert exact_match("1,000", ["1000"]) == 1.0
    assert exact_match("1000", ["10000"]) == 0.0
    assert exact_match("１９４５", ["1945"]) == 1.0


def test_unicode_accents():
    assert exact_match("Gödel", ["Godel"]) == 1.0
    assert exact_match("Godel", ["Gödel"]) == 1.0


def test_sub_exact_match_whole_tokens():
    assert sub_exact_match("It was Paris, France.", ["paris"]) == 1.0
    assert sub_exact_match("new york city", ["New York"]) == 1.0
    assert sub_exact_match("a party", ["art"]) == 0.0
    assert sub_exact_match("Paris", ["Paris, France"]) == 0.0


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
