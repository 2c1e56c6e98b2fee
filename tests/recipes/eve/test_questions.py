"""The question pool's gate on EVE's rows (``searchplay.recipes.eve.questions``, registered as the gate of
source 'eve'): EVE's validity filter, not SSP's length rules."""

import pytest

from searchplay.quality import DataQualityError
from searchplay.quality.questions import validate_question_pool
from tests.quality.test_questions import GOOD

EVE = {"question": "Where is Landmark3?", "answer": "Town3", "seed_id": "doc-3", "source": "eve",
       "evidence": "Landmark3 is located in Town3.", "solver_accuracy": 0.5, "iteration": 1}


def test_eve_rows_meet_eves_validity_filter_not_ssps_length_rules():
    validate_question_pool([EVE, GOOD])  # a short EVE question is legal (EVE §3.1 has no length rule)
    with pytest.raises(DataQualityError, match="selfplay_question_pool_eve"):
        validate_question_pool([{**EVE, "question": "Is Town3 the place?"}])  # Norm(a) inside Norm(q)
    with pytest.raises(DataQualityError):
        validate_question_pool([{**EVE, "answer": " "}])
