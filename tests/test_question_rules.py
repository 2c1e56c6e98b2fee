from searchplay.agent.trajectory import Trajectory, Turn
from searchplay.question_rules import FilterRules, answer_in_question, rule_filter
from searchplay.retrieval.types import Document

GOOD = "Which river flows through the capital of the country where the Eiffel Tower designer was born?"


def proposer(question: str | None, queries=("eiffel birthplace", "capital of france")) -> Trajectory:
    turns = [Turn(text=f"<search>{q}</search>", start=0, end=1, action="search", search_queries=[q],
                  documents=[Document(f"d{k}", "T", "text")]) for k, q in enumerate(queries)]
    return Trajectory(role="proposer", prompt_ids=[1], response_ids=[2], loss_mask=[1], turns=turns,
                      question=question)


def test_a_good_question_passes():
    assert rule_filter(proposer(GOOD), "Seine") is None


def test_each_rule_rejects_with_its_reason():
    assert rule_filter(proposer(None), "Seine") == "no_question"
    assert rule_filter(proposer("   "), "Seine") == "empty"
    assert rule_filter(proposer("Who?"), "Seine") == "too_short"
    assert rule_filter(proposer("word " * 250), "Seine") == "too_long"
    assert rule_filter(proposer("Which river flows through Paris in France?"), "Seine") == "too_few_words"
    assert rule_filter(proposer(GOOD + " Is it the seine?"), "Seine") == "answer_in_question"
    assert rule_filter(proposer(GOOD, queries=()), "Seine") == "no_information"
    assert rule_filter(proposer(GOOD, queries=("one query",)), "Seine") == "too_few_searches"
    assert rule_filter(proposer(GOOD, queries=("q", "q")), "Seine") == "too_few_searches"
    assert rule_filter(proposer(GOOD, queries=("a", "b", "a")), "Seine") == "duplicate_searches"


def test_thresholds_are_params():
    assert rule_filter(proposer(GOOD, queries=("a", "b", "a")), "Seine", FilterRules(2, False)) is None
    assert rule_filter(proposer(GOOD, queries=("a", "b")), "Seine", FilterRules(min_searches=3)) == "too_few_searches"


def test_answer_leak_is_case_insensitive_and_normalized():
    assert answer_in_question("Kurt Gödel", "Who advised kurt godel at Vienna?")
    assert answer_in_question("The Seine", "Does the SEINE flow north?")
    assert not answer_in_question("Seine", GOOD)
    assert answer_in_question("The Seine", "Does Seine flow north?") and answer_in_question("Dijon", "In dijon?")
    assert answer_in_question("Chișinău", "Which river runs past Chisinau's old town?")
    # whole words: a normalized substring had rejected these (the answer's normalized form inside another word)
    assert not answer_in_question("The Band", "Who was the husband of the singer of the group?")
    assert not answer_in_question("U.S.", "Which agency focused on the business of the river?")


def test_a_kg_question_must_name_its_paths_head_entity_when_asked():
    question = "Which continent is the country whose capital is on the Seine part of, starting from Paris?"
    assert rule_filter(proposer(question), "Europe", head_names=["Paris"]) is None
    assert rule_filter(proposer(question), "Europe", head_names=["Romania", "România"]) == "no_head_entity"
    assert rule_filter(proposer(question), "Europe") is None  # off: the papers' filter
