"""The tag protocol: stop strings, action parsing, answer/question/think extraction, spam guard."""

from __future__ import annotations

import pytest

from searchplay.agent.prompts import SOLVER_SYSTEM_PROMPT, solver_messages
from searchplay.agent.protocol import (
    answer_tag_penalty,
    corrective_message,
    count_answer_tags,
    extract_answer,
    extract_question,
    extract_think,
    information_block,
    parse_action,
    stop_strings,
    tag_spans,
)


def test_solver_messages_verbatim():
    messages = solver_messages("  Who wrote Hamlet? ")
    assert messages[0] == {"role": "system", "content": SOLVER_SYSTEM_PROMPT}
    user = messages[1]["content"]
    assert user.startswith("Answer the given question. You must conduct reasoning inside <think> and </think>")
    assert "as many times as your want" in user  # the paper's wording, kept
    assert user.endswith("For example, <answer> Beijing </answer>. Question: Who wrote Hamlet?")


def test_solver_messages_rejects_empty_question():
    with pytest.raises(ValueError, match="question is empty"):
        solver_messages("  ")


def test_stop_strings_per_role():
    assert stop_strings("solver") == ("</search>", "</answer>")
    assert stop_strings("proposer") == ("</search>", "</question>")


def test_corrective_message_is_search_r1_wording():
    message = corrective_message("solver")
    assert message == (
        "\nMy previous action is invalid. If I want to search, I should put the query between <search> and "
        "</search>. If I want to give the final answer, I should put the answer between <answer> and </answer>. "
        "Let me try again.\n"
    )
    assert "<question> and </question>" in corrective_message("proposer")


def test_information_block():
    assert information_block("Doc 1(Title: A) a\n") == "\n<information>\nDoc 1(Title: A) a</information>\n\n"
    search_r1 = "\n\n<information>Doc 1(Title: A) a</information>\n\n"
    assert information_block("Doc 1(Title: A) a\n", "searchr1") == search_r1
    with pytest.raises(ValueError, match="information format"):
        information_block("x", "xml")


# Search-R1's data preprocessing (scripts/data_process/nq_search.py): strip, "?" when missing, and the
# template's "Question: {question}\n".
@pytest.mark.parametrize(("question", "expected"), [
    ("who wrote hamlet", "Question: who wrote hamlet?\n"),
    ("  Who wrote Hamlet? ", "Question: Who wrote Hamlet?\n"),
    ("name the capital of france.", "Question: name the capital of france.?\n"),  # the reference's own quirk
])
def test_solver_messages_search_r1_question_format(question, expected):
    assert solver_messages(question, "searchr1")[1]["content"].endswith(expected)
    assert not solver_messages(question)[1]["content"].endswith("\n")


def test_unknown_question_format_is_an_error():
    with pytest.raises(ValueError, match="question format"):
        solver_messages("who?", "markdown")


@pytest.mark.parametrize(
    ("text", "role", "kind", "content"),
    [
        ("<think>hm</think>\n<search> capital of France </search>", "solver", "search", "capital of France"),
        ("<think>ok</think><answer> Paris </answer>", "solver", "answer", "Paris"),
        ("<think>ok</think><question> Who? </question>", "proposer", "question", "Who?"),
        ("<search>q1</search> trailing", "solver", "search", "q1"),
        ("<search><search>inner</search>", "solver", "search", "inner"),  # unbalanced: nearest opening wins
    ],
)
def test_parse_action_valid(text, role, kind, content):
    action = parse_action(text, role)
    assert (action.kind, action.content, action.reason) == (kind, content, None)


@pytest.mark.parametrize(
    ("text", "role", "reason"),
    [
        ("<think>just thinking", "solver", "no <search> or <answer> action"),
        ("<answer>Paris", "solver", "no <search> or <answer> action"),  # never closed (EOS / length)
        ("Paris</answer>", "solver", "</answer> without an opening tag"),
        ("<search>   </search>", "solver", "empty <search>"),
        ("<answer></answer>", "solver", "empty <answer>"),
        ("<search>a <think>b</think> c</search>", "solver", "nested tags inside <search>"),
        ("<answer>x <information>y</answer>", "solver", "nested tags inside <answer>"),
        ("<question>Who?</question>", "solver", "no <search> or <answer> action"),  # wrong role's tag
        ("<answer>Paris</answer>", "proposer", "no <search> or <question> action"),
    ],
)
def test_parse_action_invalid(text, role, reason):
    action = parse_action(text, role)
    assert action.kind == "invalid"
    assert action.reason == reason


def test_tag_spans_ignores_unbalanced():
    assert tag_spans("</answer><answer>a</answer><answer>b", "answer") == ["a"]
    assert tag_spans("no tags", "think") == []


def test_extract_answer_is_last_question_is_first():
    text = "<answer>first</answer> more <answer> last </answer>"
    assert extract_answer(text) == "last"
    assert extract_question("<question> q1 </question><question>q2</question>") == "q1"
    assert extract_answer("<answer>open only") is None
    assert extract_question("") is None


def test_extract_think_joins_all_spans():
    text = "<think> a </think><search>x</search><information>doc</information><think>b</think><think></think>"
    assert extract_think(text) == "a\nb"


def test_answer_tag_count_and_penalty():
    spam = "<answer>" * 6 + "a</answer>"
    assert count_answer_tags(spam) == 6 and count_answer_tags(spam, "sum") == 7
    assert count_answer_tags("<answer>a</answer>") == 1 and count_answer_tags("<answer>a</answer>", "sum") == 2
    assert answer_tag_penalty(10, 10) == 1.0
    assert answer_tag_penalty(11, 10) == 0.25
    assert answer_tag_penalty(3, 2) == 0.25


def test_ssp_spam_rule_fires_on_opening_or_closing_tags_alone():
    """SSP code: more than 10 opening OR more than 10 closing tags; 6 + 6 is spam only when summed."""
    six_pairs = "<answer>x</answer>" * 6
    eleven_open = "<answer>" * 11 + "x"
    eleven_close = "x" + "</answer>" * 11
    assert answer_tag_penalty(count_answer_tags(six_pairs), 10) == 1.0
    assert answer_tag_penalty(count_answer_tags(six_pairs, "sum"), 10) == 0.25
    assert answer_tag_penalty(count_answer_tags(eleven_open), 10) == 0.25
    assert answer_tag_penalty(count_answer_tags(eleven_close), 10) == 0.25
    with pytest.raises(ValueError, match="either"):
        count_answer_tags(six_pairs, "both")
