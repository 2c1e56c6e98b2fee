"""The three-way split of the KG pool and the template questions (``searchplay.split``, ``searchplay.templates``)."""

from __future__ import annotations

import pytest

from searchplay.split import SPLITS, majority_answer, record_split, split_counts, split_of
from searchplay.templates import RELATION_PHRASES, relation_phrase, template_question

IDS = [f"Q{k}-3h-P17-P36-P30" for k in range(2000)]


def test_every_id_lands_in_exactly_one_split_at_about_its_share():
    splits = [split_of(i, 0.1, 0.4) for i in IDS]
    shares = {name: splits.count(name) / len(IDS) for name in SPLITS}
    assert shares["kg_heldout"] == pytest.approx(0.1, abs=0.03)
    assert shares["warmstart"] == pytest.approx(0.4, abs=0.04)
    assert shares["selfplay"] == pytest.approx(0.5, abs=0.04)


def test_the_split_is_a_function_of_the_id_alone_and_heldout_never_moves():
    assert [split_of(i, 0.1, 0.4) for i in IDS] == [split_of(i, 0.1, 0.4) for i in IDS]
    heldout = {i for i in IDS if split_of(i, 0.1, 0.0) == "kg_heldout"}
    assert heldout == {i for i in IDS if split_of(i, 0.1, 0.4) == "kg_heldout"}  # adding a warm-start share
    with pytest.raises(ValueError, match="sum to <= 1"):
        split_of("Q1", 0.7, 0.5)


def test_records_without_a_split_fail_with_the_fix_and_counts_name_every_split():
    assert split_counts([{"id": "a", "split": "warmstart"}]) == {"selfplay": 0, "warmstart": 1, "kg_heldout": 0}
    with pytest.raises(ValueError, match="searchplay kg extract"):
        record_split({"id": "a"})


def test_majority_answer_counts_the_training_splits_only():
    rows = [("Europe", "selfplay"), ("Asia", "warmstart"), ("Asia", "selfplay"), ("Europe", "kg_heldout"),
            ("Europe", "kg_heldout")]
    records = [{"id": str(k), "answer": answer, "split": split} for k, (answer, split) in enumerate(rows)]
    assert majority_answer(records) == "Asia"
    assert majority_answer([]) is None


@pytest.mark.parametrize(("labels", "expected"), [
    (["capital of"], "What is the territory whose capital is Lima?"),
    (["capital"], "What is the capital of Lima?"),
    (["shares border with", "continent"], "What is the continent of a country bordering Lima?"),
    (["located in the administrative territorial entity"], "What is the administrative region containing Lima?"),
    (["mayor of"], "What is the mayor of Lima?"),  # no entry: the label's own preposition is dropped
    (["educated at", "place of birth"], "What is the birthplace of the institution where Lima was educated?"),
])
def test_template_questions_never_double_a_preposition(labels, expected):
    record = {"path": [{"label": "Lima"}], "relations": [{"label": label} for label in labels]}
    assert template_question(record) == expected


def test_no_phrase_doubles_of_or_drops_its_placeholder():
    for label in RELATION_PHRASES:
        phrase = relation_phrase(label, "Lima")
        assert "Lima" in phrase and "of of" not in phrase and "  " not in phrase
    assert template_question({"path": [{"label": "Georgia (country)"}], "relations": [{"label": "capital"}]}) == (
        "What is the capital of Georgia?")
