import pytest

from searchplay.quality import DataQualityError
from searchplay.quality.questions import validate_question_pool

GOOD = {"question": "Which river flows through the capital of the country where the Eiffel Tower stands?",
        "answer": "Seine", "seed_id": "Q90", "source": "fresh", "solver_accuracy": 0.4, "iteration": 1}


def test_a_pool_that_passed_the_rule_filter_passes():
    validate_question_pool([GOOD, {**GOOD, "source": "replay", "solver_accuracy": 1.0}])


def test_an_empty_iteration_is_legal():
    assert validate_question_pool([]) is None


@pytest.mark.parametrize("broken", [
    {"answer": "Eiffel Tower"},             # the answer is in the question
    {"question": "Which river?"},           # too short and too few words
    {"source": "invented"},
    {"solver_accuracy": 1.5},
])
def test_a_broken_question_stops_the_run_with_a_report(broken):
    with pytest.raises(DataQualityError) as error:
        validate_question_pool([GOOD, {**GOOD, **broken}])
    assert "selfplay_question_pool" in str(error.value)
