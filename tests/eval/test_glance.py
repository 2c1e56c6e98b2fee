from searchplay.eval.behaviour import BehaviourComparison
from searchplay.eval.glance import glance_rows, verdict
from searchplay.eval.paired import PairedComparison
from searchplay.eval.waypoints import CoverageComparison


def _paired(only_a: int, only_b: int, p: float, scope: str = "kg_heldout") -> PairedComparison:
    return PairedComparison("kg_wcr", "warmstart", scope, 100, 10, only_a, only_b, 90 - only_a - only_b, p)


def _searches(more: int, fewer: int) -> BehaviourComparison:
    return BehaviourComparison("kg_wcr", "warmstart", "kg_heldout", 100, 20, more, fewer, 1.2, 1.0)


def _coverage(more: int, less: int) -> CoverageComparison:
    return CoverageComparison("kg_wcr", "warmstart", 100, more, less, 0.3, 0.28)


def test_the_verdict_names_what_moved_and_always_correctness():
    assert verdict(_paired(12, 1, 0.003), _searches(0, 0), _coverage(1, 9)) == (
        "more right answers; names less of the path")
    assert verdict(_paired(1, 12, 0.003), None, None) == "fewer right answers"
    assert verdict(_paired(3, 5, 0.73), _searches(25, 1), _coverage(10, 1)) == (
        "searches more; names more of the path; correctness: no difference shown")
    assert verdict(_paired(3, 5, 0.73), _searches(3, 2), _coverage(1, 1)) == "no difference shown by any of the 3 tests"
    assert verdict(_paired(0, 0, 1.0), None, None) == "no difference shown"


def test_a_count_at_the_threshold_is_not_called():
    assert verdict(_paired(4, 0, 0.125), _searches(6, 0), None) == "searches more; correctness: no difference shown"
    assert verdict(_paired(5, 0, 0.0625), _searches(4, 0), None) == "no difference shown by any of the 2 tests"


def test_rows_keep_one_scope_and_join_each_pair_s_tests():
    rows = glance_rows([_paired(3, 5, 0.73), _paired(9, 9, 1.0, scope="pooled")], [_searches(25, 1)],
                       [_coverage(10, 1)], "kg_heldout")
    assert rows == [["kg_wcr vs warmstart", 100, "3 / 5 (p = 0.73)", "25 / 1 (p < 0.001)", "10 / 1 (p = 0.012)",
                     "searches more; names more of the path; correctness: no difference shown"]]
    assert glance_rows([_paired(3, 5, 0.73)], [], [], "kg_heldout")[0][3:5] == ["–", "–"]
