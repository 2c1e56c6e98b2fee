import pytest

from searchplay.rewards import extract_think_text, waypoint_coverage

WAYPOINTS = ["Albert Einstein", "ETH Zurich", "Zurich", "Switzerland"]  # path to Bern (KG-paths §1)


def test_coverage_is_share_of_titles_found_as_exact_substrings():
    think = "Albert Einstein taught at ETH Zurich."  # "Zurich" is inside "ETH Zurich": counts (substring)
    assert waypoint_coverage(think, WAYPOINTS) == pytest.approx(3 / 4)


def test_coverage_is_case_sensitive_by_default_and_casefold_is_opt_in():
    assert waypoint_coverage("albert einstein, eth zurich", WAYPOINTS) == 0.0
    assert waypoint_coverage("albert einstein, eth zurich", WAYPOINTS, casefold=True) == pytest.approx(3 / 4)


def test_duplicate_waypoints_count_once_and_repeats_in_text_do_not_add():
    assert waypoint_coverage("Zurich Zurich Zurich", ["Zurich", "Zurich", "Bern"]) == pytest.approx(1 / 2)


def test_empty_waypoints_give_zero_and_blank_titles_are_rejected():
    assert waypoint_coverage("anything", []) == 0.0
    with pytest.raises(ValueError, match="non-empty"):
        waypoint_coverage("anything", ["Zurich", " "])


def test_think_extraction_ignores_text_outside_think_spans():
    response = ("<think>Who founded it?</think>\n<search>ETH Zurich founder</search>\n"
                "<information>Doc 1(Title: Switzerland) Albert Einstein ...</information>\n"
                "<think>It is in Zurich</think>\n<answer>Switzerland</answer>")
    think = extract_think_text(response)
    assert think == "Who founded it?\nIt is in Zurich"
    # titles only in <search>, <information> or <answer> do not count
    assert waypoint_coverage(think, WAYPOINTS) == pytest.approx(1 / 4)


def test_think_spans_are_joined_so_titles_cannot_match_across_spans():
    think = extract_think_text("<think>ETH</think><think>Zurich</think>")
    assert waypoint_coverage(think, ["ETH Zurich"]) == 0.0
    assert waypoint_coverage(think, ["Zurich"]) == 1.0


def test_unclosed_think_span_is_not_counted():
    assert extract_think_text("<think>done</think><think>truncated Zurich") == "done"


def test_coverage_sees_only_the_text_it_is_given():
    assert waypoint_coverage("", WAYPOINTS) == 0.0
